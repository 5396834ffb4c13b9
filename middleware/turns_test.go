package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// checkCounter counts the checks of a store that have returned.
type checkCounter struct {
	idempotency.Store
	checks atomic.Int64
}

func (s *checkCounter) IsProcessed(ctx context.Context, key string) (bool, error) {
	defer s.checks.Add(1)
	return s.Store.IsProcessed(ctx, key)
}

// deliverAtOnce delivers copies of one message into h from as many
// goroutines and returns their errors.
func deliverAtOnce(h message.HandlerFunc, copies int) []error {
	id := watermill.NewUUID()
	errs := make([]error, copies)
	var wg sync.WaitGroup
	for i := range copies {
		wg.Go(func() { _, errs[i] = h(message.NewMessage(id, nil)) })
	}
	wg.Wait()
	return errs
}

// holdUntil polls cond, for a handler that a test keeps running until the
// other deliveries are where the test wants them; it gives up with an
// error after kototest.DefaultTimeout, so that a broken test fails rather than
// hangs.
func holdUntil(what string, cond func() bool) error {
	deadline := time.Now().Add(kototest.DefaultTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// TestConcurrentCopiesRunTheHandlerOnce: copies of one message delivered
// into one middleware at once, as a concurrent subscriber hands them out
// (other record keys, other partitions, or Unordered), run the handler
// once. Its run lasts until every other copy has checked the store or
// waits for its turn, so without turns they all find no mark and run too.
// The others are acked as duplicates, and no turn is left behind.
func TestConcurrentCopiesRunTheHandlerOnce(t *testing.T) {
	const copies = 16
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			store := &checkCounter{Store: kind.new(t)}
			var runs, duplicates atomic.Int64
			m := newIdempotency(t, store, middleware.IdempotencyConfig{
				OnDuplicate: func(*message.Message, string, string) { duplicates.Add(1) },
			})
			h := m.Middleware(func(*message.Message) ([]*message.Message, error) {
				runs.Add(1)
				return nil, holdUntil("every copy to check or wait", func() bool {
					_, inTurn := m.chain.Turns()
					return store.checks.Load()+int64(max(inTurn-1, 0)) >= copies
				})
			})

			for i, err := range deliverAtOnce(h, copies) {
				if err != nil {
					t.Errorf("copy %d: %v", i, err)
				}
			}
			if n := runs.Load(); n != 1 {
				t.Errorf("handler ran %d times for %d copies delivered at once, want 1", n, copies)
			}
			if n := duplicates.Load(); n != copies-1 {
				t.Errorf("%d copies acked as duplicates, want %d", n, copies-1)
			}
			if keys, inTurn := m.chain.Turns(); keys != 0 || inTurn != 0 {
				t.Errorf("after the deliveries, %d keys and %d deliveries in turns, want none", keys, inTurn)
			}
		})
	}
}

// TestConcurrentCopyRunsAfterAFailure: of copies delivered at once, the
// one whose turn comes after a failed run runs the handler again, and the
// rest are duplicates of it.
func TestConcurrentCopyRunsAfterAFailure(t *testing.T) {
	const copies = 8
	store := &checkCounter{Store: memoryStore(t)}
	var runs atomic.Int64
	m := newIdempotency(t, store, middleware.IdempotencyConfig{})
	boom := errors.New("boom")
	h := m.Middleware(func(*message.Message) ([]*message.Message, error) {
		if runs.Add(1) > 1 {
			return nil, nil
		}
		if err := holdUntil("every copy to check or wait", func() bool {
			_, inTurn := m.chain.Turns()
			return store.checks.Load()+int64(max(inTurn-1, 0)) >= copies
		}); err != nil {
			return nil, err
		}
		return nil, boom
	})

	failed := 0
	for i, err := range deliverAtOnce(h, copies) {
		switch {
		case errors.Is(err, boom):
			failed++
		case err != nil:
			t.Errorf("copy %d: %v", i, err)
		}
	}
	if n := runs.Load(); failed != 1 || n != 2 {
		t.Errorf("%d copies failed and the handler ran %d times, want the first to fail and one more run", failed, n)
	}
}

// TestTurnWaitEndsWithTheContext: a copy waiting for its turn behind a
// run that goes on gives up when its context ends, as an outage, and
// leaves the turn to the run.
func TestTurnWaitEndsWithTheContext(t *testing.T) {
	m := newIdempotency(t, memoryStore(t), middleware.IdempotencyConfig{})
	running, finish := make(chan struct{}), make(chan struct{})
	var started sync.Once
	h := m.Middleware(func(*message.Message) ([]*message.Message, error) {
		started.Do(func() { close(running) })
		<-finish
		return nil, nil
	})
	const id = "0190c5a4-9d7e-7000-8000-000000000010"
	first := make(chan error, 1)
	go func() { _, err := h(message.NewMessage(id, nil)); first <- err }()
	<-running

	ctx, cancel := context.WithCancel(context.Background())
	copyOf := message.NewMessage(id, nil)
	copyOf.SetContext(ctx)
	second := make(chan error, 1)
	go func() { _, err := h(copyOf); second <- err }()
	if err := holdUntil("the copy to wait for its turn", func() bool { _, n := m.chain.Turns(); return n == 2 }); err != nil {
		close(finish)
		t.Fatal(err)
	}
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) || koto.ClassOf(err) != koto.ClassOutage {
		t.Errorf("copy whose context ended while waiting: %v (class %v), want an outage wrapping context.Canceled", err, koto.ClassOf(err))
	}
	if keys, n := m.chain.Turns(); keys != 1 || n != 1 {
		t.Errorf("after the copy gave up: %d keys, %d deliveries in turns, want the run's alone", keys, n)
	}
	close(finish)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if keys, n := m.chain.Turns(); keys != 0 || n != 0 {
		t.Errorf("after the run: %d keys, %d deliveries in turns, want none", keys, n)
	}
}
