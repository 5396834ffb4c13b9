package middleware_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// gatedStore is a real in-memory store whose marks wait for release (or
// for their context) and are logged in the order they land.
type gatedStore struct {
	idempotency.Store
	release chan struct{}
	entered chan struct{} // receives once per mark that starts waiting
	events  *eventLog
}

func newGatedStore(t *testing.T, events *eventLog) *gatedStore {
	return &gatedStore{Store: memoryStore(t), release: make(chan struct{}), entered: make(chan struct{}, 1000), events: events}
}

func (s *gatedStore) MarkProcessed(ctx context.Context, key string) error {
	s.entered <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := s.Store.MarkProcessed(ctx, key); err != nil {
		return err
	}
	s.events.add("marked")
	return nil
}

// eventLog records events in order.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// returning is a handler that returns a message, so that its input is
// marked after the ack.
func returning(*message.Message) ([]*message.Message, error) {
	return []*message.Message{message.NewMessage(watermill.NewUUID(), nil)}, nil
}

// TestCloseWaitsForPendingMark: Close refuses new deliveries at once, but
// returns only once the mark that followed an ack has landed.
func TestCloseWaitsForPendingMark(t *testing.T) {
	events := &eventLog{}
	store := newGatedStore(t, events)
	dedup := newIdempotency(t, store, middleware.IdempotencyConfig{})
	h := dedup.Middleware(returning)
	msg := message.NewMessage("0190c5a4-9d7e-7000-8000-0000000000c1", nil)
	if _, err := h(msg); err != nil {
		t.Fatal(err)
	}
	msg.Ack()
	<-store.entered // the mark waits in the store

	// Until Close, a probe is a duplicate, which leaves no pending mark.
	const probe = "0190c5a4-9d7e-7000-8000-0000000000c2"
	if err := store.Store.MarkProcessed(context.Background(), probe); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() {
		err := dedup.Close(context.Background())
		events.add("closed")
		closed <- err
	}()
	kototest.WaitFor(t, "Close to refuse a new delivery", func() bool {
		_, err := h(message.NewMessage(probe, nil))
		if err != nil && !errors.Is(err, middleware.ErrClosed) {
			t.Fatalf("probe: %v", err)
		}
		return err != nil
	})
	_, err := h(message.NewMessage("0190c5a4-9d7e-7000-8000-0000000000c3", nil))
	if !errors.Is(err, middleware.ErrClosed) || koto.ClassOf(err) != koto.ClassOutage {
		t.Fatalf("delivery after Close: %v (%v), want an outage wrapping ErrClosed", err, koto.ClassOf(err))
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a mark was pending", err)
	default:
	}
	close(store.release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := events.all(); len(got) != 2 || got[0] != "marked" || got[1] != "closed" {
		t.Fatalf("events %v, want the mark before Close returned", got)
	}
	if done, _ := store.IsProcessed(context.Background(), idempotency.ScopedKey("", msg.UUID)); !done {
		t.Fatal("the pending mark did not land")
	}
}

// TestCloseGivesUpWhenContextEnds: a mark that cannot land is given up
// when Close's context ends; Close says so, and leaves no goroutine.
func TestCloseGivesUpWhenContextEnds(t *testing.T) {
	store := newGatedStore(t, &eventLog{}) // never released
	ignore := goleak.IgnoreCurrent()       // the store's sweeper lives until the test ends
	dedup, err := newDedup(store, middleware.IdempotencyConfig{})
	if err != nil {
		t.Fatal(err)
	}
	msg := message.NewMessage("0190c5a4-9d7e-7000-8000-0000000000c4", nil)
	if _, err := dedup.Middleware(returning)(msg); err != nil {
		t.Fatal(err)
	}
	msg.Ack()
	<-store.entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := dedup.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with an ended context and a stuck mark: %v, want context.Canceled", err)
	}
	if err := dedup.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := kototest.WaitNoLeaks(kototest.DefaultTimeout, ignore); err != nil {
		t.Error(err)
	}
}

// TestNothingLeftAfterRouterAndChainClose: a router whose handler returns
// messages, behind Defaults, leaves no goroutine once the router, the
// chain and the store are closed, in that order. The marks are held back
// until the router has closed, so they are pending then: the chain's
// Close must wait for them.
func TestNothingLeftAfterRouterAndChainClose(t *testing.T) {
	env := newKafkaEnv(t)
	in, out := env.topic(t, "orders"), env.topic(t, "receipts")
	const n = 5
	env.publish(t, in, newMessages(n)...)
	// The broker and env's publisher, whose producers for in now run, live
	// until the test ends.
	ignore := goleak.IgnoreCurrent()
	events := &eventLog{}
	store := newGatedStore(t, events)
	chain, err := middleware.Defaults(middleware.Config{Publisher: env.pub, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	stop := env.runRouter(t, handlerSpec{
		name: kototest.Group(t, "billing"), topic: in,
		middlewares: chain.Middlewares(), produce: returning, publishTopic: out,
	})
	for range n {
		select {
		case <-store.entered:
		case <-time.After(kototest.DefaultTimeout):
			t.Fatal("the marks after the acks never started")
		}
	}
	stop()
	close(store.release)
	if err := chain.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(events.all()); got != n {
		t.Fatalf("%d of %d pending marks landed before the chain's Close returned", got, n)
	}
	if err := store.Store.(*idempotency.MemoryStore).Close(); err != nil {
		t.Fatal(err)
	}
	if err := kototest.WaitNoLeaks(kototest.DefaultTimeout, ignore); err != nil {
		t.Error(err)
	}
}
