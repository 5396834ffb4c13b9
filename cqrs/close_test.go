package cqrs_test

import (
	"context"
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestNothingLeftAfterClose: a service whose idempotent consumer handled
// an event leaves no goroutine once the router and then the service are
// closed: Close closes the middleware chains, the in-memory store the
// service created and its own publisher.
func TestNothingLeftAfterClose(t *testing.T) {
	brokers := kototest.Brokers(t)
	orders, shipping := kototest.ServiceName(t, "orders"), kototest.ServiceName(t, "shipping")
	events, err := cqrs.NewEventPublisher(kototest.NewPublisher(t, broker.Config{Brokers: brokers}), cqrs.EventPublisherConfig{Service: orders})
	if err != nil {
		t.Fatal(err)
	}
	placed := OrderPlacedEvent{OrderID: "o-1", Amount: 10}
	if err := events.Publish(kototest.Context(t), placed); err != nil {
		t.Fatal(err)
	}
	// The broker and the events' publisher live until the test ends.
	ignore := goleak.IgnoreCurrent()

	svc, err := cqrs.NewService(cqrs.ServiceConfig{Name: shipping, Broker: broker.Config{Brokers: brokers}, Logger: kototest.Logger(slog.LevelError)})
	if err != nil {
		t.Fatal(err)
	}
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	handled := make(chan string, 1)
	err = svc.Register(kototest.Context(t), r, cqrs.NewEventConsumer(func(_ context.Context, ev *OrderPlacedEvent) error {
		handled <- ev.OrderID
		return nil
	}, cqrs.From(orders)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	if got := kototest.Receive(t, handled, "the event"); got != placed.OrderID {
		t.Fatalf("handled order %q, want %q", got, placed.OrderID)
	}

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(kototest.Context(t)); err != nil {
		t.Fatal(err)
	}
	if err := kototest.WaitNoLeaks(kototest.DefaultTimeout, ignore); err != nil {
		t.Error(err)
	}
}
