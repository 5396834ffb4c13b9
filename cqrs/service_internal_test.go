package cqrs

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
)

// TestRegisterAfterClose checks that Register after Close fails with
// ErrClosed and creates no in-memory store that no one would close.
func TestRegisterAfterClose(t *testing.T) {
	s, err := NewService(ServiceConfig{
		Name: "billing", Broker: broker.Config{Brokers: []string{"127.0.0.1:1"}}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	consumer := NewEventConsumer(func(context.Context, *orderPlaced) error { return nil }, Topic("orders.order-placed"))
	if err := s.Register(context.Background(), router, consumer); !errors.Is(err, ErrClosed) {
		t.Errorf("Register after Close: %v, want ErrClosed", err)
	}
	if _, err := s.idempotencyStore(); !errors.Is(err, ErrClosed) {
		t.Errorf("idempotency store after Close: %v, want ErrClosed", err)
	}
	if s.memStore != nil {
		t.Error("an in-memory store was created after Close")
		_ = s.memStore.Close()
	}
}

type orderPlaced struct{ ID string }
