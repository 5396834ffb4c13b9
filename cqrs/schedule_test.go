package cqrs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/topics"
)

// PaymentTimedOut is scheduled at checkout; every one shares a partition
// key, so that they reach their consumer in the order they fire.
type PaymentTimedOut struct {
	OrderID string    `json:"orderId"`
	Due     time.Time `json:"due"`
}

func (PaymentTimedOut) PartitionKey() string { return "timeouts" }

// ExpireCart is scheduled like PaymentTimedOut, as a command.
type ExpireCart struct {
	CartID string `json:"cartId"`
}

// arrival is what a consumer of a scheduled message saw.
type arrival struct {
	id          string
	late        time.Duration
	correlation string
}

// TestScheduledEventsAndCommands: PublishAfter and SendAt write into the
// outbox in the transaction of their context; the consumers get each
// message at or after its due time, with the correlation ID of the
// context that scheduled it. An event cancelled in a later transaction
// (unless its Cancel says it came too late), and one scheduled in a
// transaction that rolled back, are never consumed, though due before one
// that is; cancelling the consumed one says outbox.ErrSent.
func TestScheduledEventsAndCommands(t *testing.T) {
	e := newDurableEnv(t)
	orders, carts := kototest.ServiceName(t, "orders"), kototest.ServiceName(t, "carts")
	events, err := e.d.EventPublisher(cqrs.EventPublisherConfig{Service: orders})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.d.CommandDispatcher(cqrs.CommandDispatcherConfig{
		Service: orders, Logger: kototest.Logger(slog.LevelError),
		Routes: []cqrs.Route{cqrs.RouteOf[ExpireCart](topics.Command(carts, "expire-cart"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })

	arrived := make(chan arrival, 8)
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	ctx := kototest.Context(t)
	err = e.service(orders).Register(ctx, r, cqrs.NewEventConsumer(func(ctx context.Context, ev *PaymentTimedOut) error {
		arrived <- arrival{id: ev.OrderID, late: time.Since(ev.Due), correlation: correlation.FromContext(ctx)}
		return nil
	}, cqrs.From(orders)))
	if err != nil {
		t.Fatal(err)
	}
	var expired sync.Map
	err = e.service(carts).Register(ctx, r, cqrs.NewCommandConsumer(func(ctx context.Context, cmd *ExpireCart) error {
		expired.Store(cmd.CartID, correlation.FromContext(ctx))
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	kototest.RunRouter(t, r)

	now := time.Now()
	timeout := func(id string, after time.Duration) PaymentTimedOut {
		return PaymentTimedOut{OrderID: id, Due: now.Add(after)}
	}
	var cancelled, kept string
	err = e.d.Outbox().Transact(correlation.WithID(ctx, "checkout"), func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if cancelled, err = events.PublishAfter(ctx, 300*time.Millisecond, timeout("cancelled", 300*time.Millisecond)); err != nil {
			return err
		}
		if kept, err = events.PublishAt(ctx, now.Add(600*time.Millisecond), timeout("kept", 600*time.Millisecond)); err != nil {
			return err
		}
		_, err = d.SendAt(ctx, now.Add(100*time.Millisecond), ExpireCart{CartID: "c-1"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	errRollback := errors.New("roll back")
	err = e.d.Outbox().Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := events.PublishAfter(ctx, 0, timeout("rolled back", 0)); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	err = e.d.Outbox().Transact(ctx, func(ctx context.Context, tx pgx.Tx) error { return events.Cancel(ctx, cancelled) })
	switch {
	case errors.Is(err, outbox.ErrSent): // a machine slower than 300 ms
		t.Log("the cancel came after the send")
		if a := kototest.Receive(t, arrived, "a PaymentTimedOut"); a.id != "cancelled" {
			t.Errorf("first PaymentTimedOut: %s, want the one whose Cancel came too late", a.id)
		}
	case err != nil:
		t.Fatalf("Cancel: %v", err)
	}

	a := kototest.Receive(t, arrived, "a PaymentTimedOut")
	if a.id != "kept" || a.late < 0 || a.correlation != "checkout" {
		t.Errorf("first PaymentTimedOut: %s, %v late, correlation %q; want kept, not early, checkout", a.id, a.late, a.correlation)
	}
	kototest.WaitFor(t, "the command", func() bool { _, ok := expired.Load("c-1"); return ok })
	if c, _ := expired.Load("c-1"); c != "checkout" {
		t.Errorf("ExpireCart with correlation %q, want checkout", c)
	}
	err = e.d.Outbox().Transact(ctx, func(ctx context.Context, tx pgx.Tx) error { return events.Cancel(ctx, kept) })
	if !errors.Is(err, outbox.ErrSent) {
		t.Errorf("Cancel of the consumed event: %v, want outbox.ErrSent", err)
	}
}

// TestScheduleRefused: the zero time and a negative delay are poison
// errors wrapping outbox.ErrInvalidSchedule; a publisher or dispatcher
// that does not write into an outbox cannot schedule.
func TestScheduleRefused(t *testing.T) {
	e := newDurableEnv(t)
	ctx := kototest.Context(t)
	events, err := e.d.EventPublisher(cqrs.EventPublisherConfig{Service: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	err = e.d.Outbox().Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, zero := events.PublishAt(ctx, time.Time{}, PaymentTimedOut{OrderID: "zero"})
		_, negative := events.PublishAfter(ctx, -time.Second, PaymentTimedOut{OrderID: "negative"})
		for what, err := range map[string]error{"zero time": zero, "negative delay": negative} {
			if !errors.Is(err, outbox.ErrInvalidSchedule) || koto.ClassOf(err) != koto.ClassPoison {
				t.Errorf("%s: %v (%v), want ErrInvalidSchedule, poison", what, err, koto.ClassOf(err))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	direct := kototest.NewPublisher(t, broker.Config{Brokers: e.brokers})
	plain, err := cqrs.NewEventPublisher(direct, cqrs.EventPublisherConfig{Service: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	d := newDispatcher(t, direct, e.brokers, cqrs.CommandDispatcherConfig{
		Service: "orders", Routes: []cqrs.Route{cqrs.RouteOf[ExpireCart]("carts.expire-cart")},
	})
	_, pubErr := plain.PublishAfter(ctx, time.Second, PaymentTimedOut{OrderID: "direct"})
	_, sendErr := d.SendAfter(ctx, time.Second, ExpireCart{CartID: "direct"})
	for what, err := range map[string]error{"PublishAfter": pubErr, "SendAfter": sendErr, "Cancel": plain.Cancel(ctx, "x")} {
		if !errors.Is(err, cqrs.ErrCannotSchedule) || koto.ClassOf(err) != koto.ClassPoison {
			t.Errorf("%s on the broker's publisher: %v, want ErrCannotSchedule, poison", what, err)
		}
	}
}

// ChargeRequested meets a flaky dependency on its first attempt.
type ChargeRequested struct {
	OrderID string `json:"orderId"`
	Seq     int    `json:"seq"`
}

func (e ChargeRequested) PartitionKey() string { return e.OrderID }

// TestServiceParksFailingMessages: a DurableOutbox Service with
// DeadLetter.Parking.Delays parks a consumer's failing event in the
// DurableOutbox's parking table, its key's next event behind it, and
// both run later, in order, once each.
func TestServiceParksFailingMessages(t *testing.T) {
	e := newDurableEnv(t)
	orders := kototest.ServiceName(t, "orders")
	events, err := e.d.EventPublisher(cqrs.EventPublisherConfig{Service: orders})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := e.d.Service(cqrs.ServiceConfig{
		Name: orders, AutoProvisionTopics: true, Logger: kototest.Logger(slog.LevelError),
		Broker: broker.Config{Brokers: e.brokers},
		DeadLetter: middleware.DeadLetterConfig{MaxAttempts: 1, Backoff: koto.Backoff{InitialInterval: time.Millisecond},
			Parking: middleware.ParkingConfig{Delays: []time.Duration{100 * time.Millisecond}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, svc)
	var calls atomic.Int64
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	ctx := kototest.Context(t)
	err = svc.Register(ctx, r, cqrs.NewEventConsumer(func(ctx context.Context, ev *ChargeRequested) error {
		if calls.Add(1) == 1 {
			return errors.New("flaky dependency")
		}
		return e.effect(ctx, fmt.Sprintf("captured %s/%d", ev.OrderID, ev.Seq))
	}, cqrs.From(orders)))
	if err != nil {
		t.Fatal(err)
	}
	kototest.RunRouter(t, r)
	err = e.d.Outbox().Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
		return errors.Join(events.Publish(ctx, ChargeRequested{OrderID: "o-1", Seq: 1}), events.Publish(ctx, ChargeRequested{OrderID: "o-1", Seq: 2}))
	})
	if err != nil {
		t.Fatal(err)
	}
	kototest.WaitFor(t, "both effects", func() bool { return e.effects("captured o-1/1")+e.effects("captured o-1/2") == 2 })
	var order []string
	rows, _ := e.pool.Query(ctx, "SELECT what FROM "+e.schema+".effects WHERE what LIKE 'captured%' ORDER BY id")
	for rows.Next() {
		var w string
		_ = rows.Scan(&w)
		order = append(order, w)
	}
	rows.Close()
	if fmt.Sprint(order) != "[captured o-1/1 captured o-1/2]" {
		t.Errorf("effects %v, want o-1/1 then o-1/2", order)
	}
	kototest.WaitFor(t, "nothing parked", func() bool {
		st, err := e.d.Parking().Status(ctx)
		return err == nil && len(st) == 0
	})
}
