package kafkatest

import (
	"context"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
)

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
		t.Fatalf("router stopped at start: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := r.Close(); err != nil {
				t.Errorf("router close: %v", err)
			}
			if err := <-done; err != nil {
				t.Errorf("router run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
