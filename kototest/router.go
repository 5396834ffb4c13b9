package kototest

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

// NewRouter returns a router that logs to logger (nil: nothing) and gives
// its handlers [DefaultTimeout] to finish when it closes. [RunRouter] runs
// it.
func NewRouter(t testing.TB, logger *slog.Logger) *message.Router {
	t.Helper()
	var wl watermill.LoggerAdapter = watermill.NopLogger{}
	if logger != nil {
		wl = watermill.NewSlogLogger(logger)
	}
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: DefaultTimeout}, wl)
	if err != nil {
		t.Fatalf("kototest: NewRouter: %v", err)
	}
	return r
}

// Logger returns a logger of the records at level and above, to stderr
// with go test -v and nowhere otherwise: tests provoke retries, timeouts
// and dead letters on purpose.
func Logger(level slog.Level) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// RunRouter runs r and returns once its handlers run, failing t if it
// stops before. stop closes r and waits for Run to return; the test's
// cleanup calls it too.
func RunRouter(t testing.TB, r *message.Router) (stop func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	select {
	case <-r.Running():
	case err := <-done:
		t.Fatalf("kototest: the router stopped at start: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := r.Close(); err != nil {
				t.Errorf("kototest: close the router: %v", err)
			}
			if err := <-done; err != nil {
				t.Errorf("kototest: the router stopped with %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
