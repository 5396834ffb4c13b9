package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// roleEnv selects, in a re-executed test binary, the role it plays instead
// of running the tests; configEnv carries the role's consumerConfig.
const (
	roleEnv      = "KOTO_RELIABILITY_ROLE"
	configEnv    = "KOTO_RELIABILITY_CONFIG"
	roleConsumer = "consumer"
)

// runRole plays the role roleEnv names and returns the exit code.
func runRole(role string) int {
	if role == roleBatchConsumer {
		if err := runBatchProcess(); err != nil {
			fmt.Fprintf(os.Stderr, "batch consumer: %v\n", err)
			return 1
		}
		return 0
	}
	if role != roleConsumer {
		fmt.Fprintf(os.Stderr, "unknown %s %q\n", roleEnv, role)
		return 2
	}
	if err := runConsumerProcess(); err != nil {
		fmt.Fprintf(os.Stderr, "consumer: %v\n", err)
		return 1
	}
	return 0
}

// runConsumerProcess runs a consumer until SIGTERM, or until its standard
// input closes: when the test that started it ends, however it ends. A
// line "open n" on its standard input opens the holds below n; it writes
// "h k" when a delivery is held by hold k.
func runConsumerProcess() error {
	var cfg consumerConfig
	if err := json.Unmarshal([]byte(os.Getenv(configEnv)), &cfg); err != nil {
		return fmt.Errorf("%s: %w", configEnv, err)
	}
	pcfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		return err
	}
	pcfg.MaxConns = 12
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h := newHolds(cfg.Open)
	h.onHold = func(k int, _ string) { fmt.Printf("h %d\n", k) }
	c, err := startConsumer(pool, cfg, h, os.Stdout, logger)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	go func() {
		defer stop()
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "open "); ok {
				k, _ := strconv.Atoi(n)
				h.openTo(k)
			}
		}
	}()
	<-ctx.Done()
	h.openAll() // no held delivery keeps the router from closing
	return c.stop()
}

// process is a consumer running in a subprocess: the test binary again,
// with roleEnv set.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr kototest.Buffer
	read   chan struct{} // closed once stdout is read to its end

	mu       sync.Mutex
	ready    bool
	inFlight map[string]int // deliveries begun and not ended, by UUID
	held     map[int]bool   // the holds that held a delivery
}

// spawn starts a consumer of cfg in a subprocess and waits until it runs.
func spawn(t *testing.T, cfg consumerConfig) *process {
	t.Helper()
	cfg.Trace = true
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+roleConsumer, configEnv+"="+string(data))
	p := &process{cmd: cmd, read: make(chan struct{}), inFlight: map[string]int{}, held: map[int]bool{}}
	cmd.Stderr = &p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // should the test fail before it stops p
		_ = cmd.Process.Kill()
		<-p.read
		_ = cmd.Wait()
	})
	go p.trace(stdout)
	kototest.WaitFor(t, "the consumer subprocess to run", func() bool {
		select {
		case <-p.read:
			t.Fatalf("consumer subprocess exited at start: %s", p.stderr.String())
		default:
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.ready
	})
	return p
}

// trace follows the subprocess's trace lines.
func (p *process) trace(stdout io.Reader) {
	defer close(p.read)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		switch {
		case line == "ready":
			p.ready = true
		case strings.HasPrefix(line, "b "):
			p.inFlight[line[2:]]++
		case strings.HasPrefix(line, "e "):
			if p.inFlight[line[2:]]--; p.inFlight[line[2:]] <= 0 {
				delete(p.inFlight, line[2:])
			}
		case strings.HasPrefix(line, "h "):
			k, _ := strconv.Atoi(line[2:])
			p.held[k] = true
		}
		p.mu.Unlock()
	}
}

// holding reports whether p held a delivery by hold k, and whether it
// exited.
func (p *process) holding(k int) (held, exited bool) {
	select {
	case <-p.read:
		exited = true
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[k], exited
}

// open opens the holds of p below n.
func (p *process) open(t *testing.T, n int) {
	t.Helper()
	if _, err := fmt.Fprintf(p.stdin, "open %d\n", n); err != nil {
		t.Fatalf("open the holds below %d of a consumer subprocess: %v", n, err)
	}
}

// kill kills p with SIGKILL and returns how many deliveries it had in
// flight: begun and not ended, the handler's effect possibly written and
// the message not marked.
func (p *process) kill(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill consumer: %v", err)
	}
	<-p.read
	_ = p.cmd.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.inFlight {
		n += c
	}
	return n
}

// stop ends p gently (its standard input closes) and checks that it
// exited cleanly: a race the detector found in it fails the test too.
func (p *process) stop(t *testing.T) {
	t.Helper()
	_ = p.stdin.Close()
	select {
	case <-p.read:
	case <-time.After(kototest.DefaultTimeout):
		t.Errorf("consumer subprocess did not stop within %v", kototest.DefaultTimeout)
		_ = p.cmd.Process.Kill()
		<-p.read
	}
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("consumer subprocess: %v\n%s", err, p.stderr.String())
	}
}
