package cqrs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

// inFlight counts the handlers running at once and keeps the most.
type inFlight struct{ now, most atomic.Int64 }

func (f *inFlight) enter() {
	n := f.now.Add(1)
	for m := f.most.Load(); n > m && !f.most.CompareAndSwap(m, n); m = f.most.Load() {
	}
}

func (f *inFlight) leave() { f.now.Add(-1) }

// TestConcurrentTransactionalConsumersFitThePool: two transactional
// consumers of Concurrency 5 on a pool of 12 connections, exactly what
// they may hold with 2 to spare, are registered and handle 100 orders,
// each published twice, with many messages in flight: each consumer's
// effect of each order commits once.
func TestConcurrentTransactionalConsumersFitThePool(t *testing.T) {
	const orders = 100
	e := newDurableEnvWith(t, 12)
	shop, payments := kototest.ServiceName(t, "shop"), kototest.ServiceName(t, "payments")
	charge, ship := kototest.Group(t, "charge"), kototest.Group(t, "ship")
	var flight inFlight
	consumer := func(group, what string) cqrs.Consumer {
		return cqrs.NewEventConsumer(func(ctx context.Context, ev *OrderSubmitted) error {
			flight.enter()
			defer flight.leave()
			return e.effect(ctx, what+" "+ev.OrderID)
		}, cqrs.From(shop), cqrs.ConsumerGroup(group))
	}
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	if err := e.concurrentService(payments, 5).Register(kototest.Context(t), r, consumer(charge, "charge"), consumer(ship, "ship")); err != nil {
		t.Fatalf("Register: %v", err)
	}
	kototest.RunRouter(t, r)

	events, err := e.d.EventPublisher(cqrs.EventPublisherConfig{Service: shop})
	if err != nil {
		t.Fatal(err)
	}
	ctx := kototest.Context(t)
	for range 2 { // each order's message ID twice: a retrying producer
		err := e.d.Outbox().Transact(ctx, func(ctx context.Context, _ pgx.Tx) error {
			for i := range orders {
				if err := events.Publish(ctx, OrderSubmitted{OrderID: fmt.Sprintf("o-%d", i)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	topic := topics.Event(shop, "order-submitted")
	kototest.WaitCommitted(t, e.brokers, charge, topic, 2*orders)
	kototest.WaitCommitted(t, e.brokers, ship, topic, 2*orders)

	for i := range orders {
		for _, what := range []string{"charge", "ship"} {
			if n := e.effects(fmt.Sprintf("%s o-%d", what, i)); n != 1 {
				t.Errorf("%d effects %q, want 1", n, fmt.Sprintf("%s o-%d", what, i))
			}
		}
	}
	t.Logf("at most %d handlers in flight at once", flight.most.Load())
}

// TestTransactionalConsumersMustFitThePool: Register refuses transactional
// consumers whose Concurrency, summed over the DurableOutbox's services
// with 2 to spare, exceeds the pool's MaxConns, naming the numbers and
// adding nothing; consumers outside a transaction are not counted, and a
// Service's Close, or a Register that fails, gives its connections back.
func TestTransactionalConsumersMustFitThePool(t *testing.T) {
	e := newDurableEnvWith(t, 12)
	shop := kototest.ServiceName(t, "shop")
	noop := func(context.Context, *OrderSubmitted) error { return nil }
	consumer := func(group string) cqrs.Consumer {
		return cqrs.NewEventConsumer(noop, cqrs.From(shop), cqrs.ConsumerGroup(kototest.Group(t, group)))
	}
	ctx := kototest.Context(t)
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	kototest.RunRouter(t, r) // which closes the subscribers when the test ends
	refused := func(err error, want string) {
		t.Helper()
		if !errors.Is(err, koto.ErrInvalidConfig) || err == nil || !strings.HasPrefix(err.Error(), "invalid configuration: "+want) ||
			!strings.Contains(err.Error(), "pool_max_conns") {
			t.Errorf("Register = %v\nwant koto.ErrInvalidConfig starting %q and naming pool_max_conns", err, want)
		}
	}

	six := e.concurrentService(kototest.ServiceName(t, "six"), 6)
	refused(six.Register(ctx, r, consumer("a"), consumer("b")),
		"cqrs.ServiceConfig.Broker.Concurrency is 6, so the 2 transactional consumer(s) being registered may hold 12 connections "+
			"of the DurableOutbox's pool at once; with the 0 of those registered before and 2 to spare, 14, more than the pool's MaxConns (12)")
	if n := len(r.Handlers()); n != 0 {
		t.Fatalf("a refused Register added %d handlers", n)
	}
	if err := six.Register(ctx, r, consumer("a")); err != nil {
		t.Fatalf("one consumer of Concurrency 6 on 12 connections: %v", err)
	}

	five := e.concurrentService(kototest.ServiceName(t, "five"), 5)
	refused(five.Register(ctx, r, consumer("c")),
		"cqrs.ServiceConfig.Broker.Concurrency is 5, so the 1 transactional consumer(s) being registered may hold 5 connections "+
			"of the DurableOutbox's pool at once; with the 6 of those registered before and 2 to spare, 13, more than the pool's MaxConns (12)")
	command := cqrs.NewCommandConsumer(func(context.Context, *ReserveStock) error { return nil })
	if err := five.Register(ctx, r, command); err != nil {
		t.Errorf("a command consumer, outside a transaction: %v", err)
	}

	if err := six.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := six.Register(ctx, r, consumer("d")); !errors.Is(err, cqrs.ErrClosed) {
		t.Fatalf("Register after Close = %v, want ErrClosed", err)
	}
	if err := five.Register(ctx, r, consumer("c")); err != nil {
		t.Errorf("after the other Service's Close, and its Register that failed: %v", err)
	}
}
