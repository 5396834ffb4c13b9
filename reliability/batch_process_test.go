package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// roleBatchConsumer is the role of a subprocess that runs the batch
// consumer of the batchSpec in configEnv.
const roleBatchConsumer = "batch-consumer"

// runBatchProcess runs a batch consumer until SIGTERM, or until its
// standard input closes. A line "open n" on its standard input opens the
// holds below n; it writes [holdText] on its standard error as a batch is
// held, and a [dupLine] line as a duplicate reaches its handler.
func runBatchProcess() error {
	var spec batchSpec
	if err := json.Unmarshal([]byte(os.Getenv(configEnv)), &spec); err != nil {
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
	holds := newBatchHolds(spec.Holds, spec.Open)
	holds.onHold = func(k, size int) { fmt.Fprintf(os.Stderr, "%s%d\n", holdText(k), size) }
	hooks := batchHooks{holds: holds, dup: func(id string) { fmt.Fprintf(os.Stderr, "%s %s\n", dupLine, id) }}
	c, err := startBatchConsumer(pool, spec, hooks, logger)
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
				holds.openTo(k)
			}
		}
	}()
	<-ctx.Done()
	holds.openTo(math.MaxInt) // no held batch keeps the router from closing
	return c.stop()
}

// spawnRole starts the test binary again as a subprocess that plays role
// with cfg, and waits until it runs.
func spawnRole(t *testing.T, role string, cfg any) *process {
	t.Helper()
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, configEnv+"="+string(data))
	p := &process{cmd: cmd, read: make(chan struct{}), inFlight: map[string]int{}}
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
	kototest.WaitFor(t, "the "+role+" subprocess to run", func() bool {
		select {
		case <-p.read:
			t.Fatalf("%s subprocess exited at start: %s", role, p.stderr.String())
		default:
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.ready
	})
	return p
}

// openBatchHolds opens the holds of the batch consumer p below n.
func openBatchHolds(t *testing.T, p *process, n int) {
	t.Helper()
	if _, err := fmt.Fprintf(p.stdin, "open %d\n", n); err != nil {
		t.Fatalf("open the holds below %d of a batch consumer subprocess: %v", n, err)
	}
}

// batchDups returns the duplicates that reached the handler of the batch
// consumer p, as it wrote them.
func batchDups(p *process) []string {
	var ids []string
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		if id, ok := strings.CutPrefix(line, dupLine+" "); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// heldBatch reports whether the batch consumer p held a batch by hold k,
// and of how many messages.
func heldBatch(p *process, k int) (size int, ok bool) {
	_, line, ok := strings.Cut("\n"+p.stderr.String(), "\n"+holdText(k))
	if !ok {
		return 0, false
	}
	line, _, _ = strings.Cut(line, "\n")
	size, _ = strconv.Atoi(line)
	return size, true
}
