package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
)

// forwarderEnv, set in a re-executed test binary, makes it run a
// forwarder of the processConfig it holds instead of the tests.
const forwarderEnv = "KOTO_OUTBOX_FORWARDER"

// processConfig is what a forwarder subprocess forwards.
type processConfig struct {
	Schema  string
	Brokers []string
	App     string
	Batch   int
}

// runForwarderProcess runs a forwarder until its standard input closes
// (when the test that started it ends) and returns the exit code.
func runForwarderProcess(raw string) int {
	if err := forwardUntilStdinCloses(raw); err != nil {
		fmt.Fprintf(os.Stderr, "forwarder: %v\n", err)
		return 1
	}
	return 0
}

func forwardUntilStdinCloses(raw string) error {
	var cfg processConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return fmt.Errorf("%s: %w", forwarderEnv, err)
	}
	pool, err := pgxpool.New(context.Background(), pgtest.URL())
	if err != nil {
		return err
	}
	defer pool.Close()
	o, err := outbox.New(pool, outbox.Config{Schema: cfg.Schema})
	if err != nil {
		return err
	}
	f, err := outbox.NewForwarder(o, outbox.ForwarderConfig{
		Broker:           broker.Config{Brokers: cfg.Brokers},
		BatchSize:        cfg.Batch,
		TakeoverInterval: 50 * time.Millisecond,
		RetryBackoff:     koto.Backoff{InitialInterval: 20 * time.Millisecond, MaxInterval: 200 * time.Millisecond},
		ApplicationName:  cfg.App,
		Logger:           slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); stop() }()
	return f.Run(ctx)
}

// forwarderProcess is a forwarder running in a subprocess.
type forwarderProcess struct {
	app    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr kototest.Buffer
	dead   bool // killed
}

// spawnForwarder starts a forwarder of e's table in a subprocess, with
// application name app, until the test ends or it is killed.
func (e *env) spawnForwarder(app string, batch int) *forwarderProcess {
	e.t.Helper()
	data, err := json.Marshal(processConfig{Schema: e.schema, Brokers: e.brokers, App: app, Batch: batch})
	if err != nil {
		e.t.Fatal(err)
	}
	p := &forwarderProcess{app: app, cmd: exec.Command(os.Args[0], "-test.run=^$")}
	p.cmd.Env = append(os.Environ(), forwarderEnv+"="+string(data))
	p.cmd.Stderr = &p.stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		e.t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if p.dead {
			return
		}
		_ = p.stdin.Close()
		if err := p.cmd.Wait(); err != nil {
			e.t.Errorf("forwarder %s: %v\n%s", app, err, p.stderr.String())
		}
	})
	return p
}

// kill kills the forwarder with SIGKILL and waits for it to exit.
func (p *forwarderProcess) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill forwarder %s: %v", p.app, err)
	}
	_ = p.cmd.Wait()
	p.dead = true
}
