package middleware_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/middleware"
)

var errPoisonBug = koto.Poison(errors.New("bug"))

// failingStore is a real in-memory store whose calls fail while told to:
// the unit tests' way to stage a store outage without a database.
type failingStore struct {
	idempotency.Store
	mu                sync.Mutex
	failChecks, fails int // calls left that fail
}

var errDown = errors.New("store down")

func (s *failingStore) failNext(checks, marks int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failChecks, s.fails = checks, marks
}

func (s *failingStore) take(n *int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *n == 0 {
		return false
	}
	*n--
	return true
}

func (s *failingStore) IsProcessed(ctx context.Context, key string) (bool, error) {
	if s.take(&s.failChecks) {
		return false, errDown
	}
	return s.Store.IsProcessed(ctx, key)
}

func (s *failingStore) MarkProcessed(ctx context.Context, key string) error {
	if s.take(&s.fails) {
		return errDown
	}
	return s.Store.MarkProcessed(ctx, key)
}

func idempotent(t *testing.T, store idempotency.Store, cfg middleware.IdempotencyConfig, calls *atomic.Int64, err error) message.HandlerFunc {
	t.Helper()
	cfg.MarkBackoff = koto.Backoff{InitialInterval: fastBackoff.initial, MaxInterval: fastBackoff.max}
	m := newIdempotency(t, store, cfg)
	return m.Middleware(func(*message.Message) ([]*message.Message, error) {
		calls.Add(1)
		return nil, err
	})
}

func TestIdempotencyStoreErrors(t *testing.T) {
	store := &failingStore{Store: memoryStore(t)}
	var calls atomic.Int64
	h := idempotent(t, store, middleware.IdempotencyConfig{}, &calls, nil)
	msg := message.NewMessage("0190c5a4-9d7e-7000-8000-000000000001", nil)

	store.failNext(1, 0)
	_, err := h(msg)
	if koto.ClassOf(err) != koto.ClassOutage || !errors.Is(err, errDown) || calls.Load() != 0 {
		t.Fatalf("failed check: err %v (want an outage), handler ran %d times (want 0)", err, calls.Load())
	}

	store.failNext(0, 3) // the mark fails three times, then works
	if _, err := h(msg); err != nil || calls.Load() != 1 {
		t.Fatalf("failed mark: err %v, handler ran %d times; want the mark retried in place and one run", err, calls.Load())
	}
	if _, err := h(msg); err != nil || calls.Load() != 1 {
		t.Fatalf("after the retried mark: err %v, handler ran %d times; want a duplicate", err, calls.Load())
	}
}

func TestIdempotencyMarkGivesUpWhenTheContextEnds(t *testing.T) {
	store := &failingStore{Store: memoryStore(t)}
	store.failNext(0, 1<<30) // the mark never succeeds
	m := newIdempotency(t, store, middleware.IdempotencyConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	msg := message.NewMessage("0190c5a4-9d7e-7000-8000-000000000002", nil)
	msg.SetContext(ctx)
	_, err := m.Middleware(func(*message.Message) ([]*message.Message, error) {
		cancel() // the router closes while the handler runs
		return nil, nil
	})(msg)
	if koto.ClassOf(err) != koto.ClassOutage || !errors.Is(err, errDown) {
		t.Fatalf("mark never succeeded and the context ended: err %v, want an outage (nack)", err)
	}
}

func TestIdempotencyIgnoreStoreErrors(t *testing.T) {
	store := &failingStore{Store: memoryStore(t)}
	var calls atomic.Int64
	h := idempotent(t, store, middleware.IdempotencyConfig{IgnoreStoreErrors: true}, &calls, nil)
	msg := message.NewMessage("0190c5a4-9d7e-7000-8000-000000000003", nil)
	store.failNext(1, 1)
	if _, err := h(msg); err != nil || calls.Load() != 1 {
		t.Fatalf("err %v, handler ran %d times; want it run despite the store", err, calls.Load())
	}
	if _, err := h(msg); err != nil || calls.Load() != 2 {
		t.Fatalf("err %v, handler ran %d times; the failed mark was dropped, so it runs again", err, calls.Load())
	}
}

func TestIdempotencyHandlerErrorMarksNothing(t *testing.T) {
	store := memoryStore(t)
	var calls atomic.Int64
	boom := errors.New("boom")
	h := idempotent(t, store, middleware.IdempotencyConfig{}, &calls, boom)
	msg := message.NewMessage("0190c5a4-9d7e-7000-8000-000000000004", nil)
	for range 2 {
		if _, err := h(msg); !errors.Is(err, boom) {
			t.Fatalf("err %v, want the handler's", err)
		}
	}
	if calls.Load() != 2 {
		t.Fatalf("handler ran %d times, want 2: a failure must not mark", calls.Load())
	}
}

func TestIdempotencyKeyAndScope(t *testing.T) {
	store := memoryStore(t)
	var calls atomic.Int64
	noUUID := message.NewMessage("", nil)
	h := idempotent(t, store, middleware.IdempotencyConfig{}, &calls, nil)
	_, err := h(noUUID)
	if koto.ClassOf(err) != koto.ClassPoison || calls.Load() != 0 {
		t.Fatalf("no UUID, no Kafka position: err %v, want poison", err)
	}

	byOrder := middleware.IdempotencyConfig{
		Key:   func(m *message.Message) (string, error) { return m.Metadata.Get("order_id"), nil },
		Scope: func(*message.Message) string { return "billing" },
	}
	h = idempotent(t, store, byOrder, &calls, nil)
	a, b := message.NewMessage("a", nil), message.NewMessage("b", nil)
	a.Metadata.Set("order_id", "42")
	b.Metadata.Set("order_id", "42")
	h(a)
	h(b)
	if calls.Load() != 1 {
		t.Fatalf("same business key: handler ran %d times, want 1", calls.Load())
	}
	if done, _ := store.IsProcessed(context.Background(), idempotency.ScopedKey("billing", "42")); !done {
		t.Fatal("the store has no billing/42")
	}
}
