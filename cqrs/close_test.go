package cqrs_test

import (
	"context"
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/internal/kafkatest"
)

// TestNothingLeftAfterClose: a service whose idempotent consumer handled
// an event leaves no goroutine once the router and then the service are
// closed: Close closes the middleware chains, the in-memory store the
// service created and its own publisher.
func TestNothingLeftAfterClose(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	orders, shipping := kafkatest.ServiceName(t, "orders"), kafkatest.ServiceName(t, "shipping")
	events, err := cqrs.NewEventPublisher(kafkatest.NewPublisher(t, broker.Config{Brokers: brokers}), cqrs.EventPublisherConfig{Service: orders})
	if err != nil {
		t.Fatal(err)
	}
	placed := OrderPlacedEvent{OrderID: "o-1", Amount: 10}
	if err := events.Publish(kafkatest.Context(t), placed); err != nil {
		t.Fatal(err)
	}
	// The broker and the events' publisher live until the test ends.
	ignore := goleak.IgnoreCurrent()

	svc, err := cqrs.NewService(cqrs.ServiceConfig{Name: shipping, Broker: broker.Config{Brokers: brokers}, Logger: kafkatest.Logger(slog.LevelError)})
	if err != nil {
		t.Fatal(err)
	}
	r := kafkatest.NewRouter(t, kafkatest.Logger(slog.LevelError))
	handled := make(chan string, 1)
	err = svc.Register(kafkatest.Context(t), r, cqrs.NewEventConsumer(func(_ context.Context, ev *OrderPlacedEvent) error {
		handled <- ev.OrderID
		return nil
	}, cqrs.From(orders)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	if got := kafkatest.Receive(t, handled, "the event"); got != placed.OrderID {
		t.Fatalf("handled order %q, want %q", got, placed.OrderID)
	}

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(kafkatest.Context(t)); err != nil {
		t.Fatal(err)
	}
	if err := kafkatest.WaitNoLeaks(kafkatest.Timeout, ignore); err != nil {
		t.Error(err)
	}
}
