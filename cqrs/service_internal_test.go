package cqrs

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/middleware"
)

// TestStoreAfterClose checks that a message after Close finds no store: an
// outage, and no in-memory store created that no one would close.
func TestStoreAfterClose(t *testing.T) {
	s, err := NewService(ServiceConfig{
		Name: "billing", Broker: broker.Config{Brokers: []string{"127.0.0.1:1"}}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	st := serviceStore{s}
	_, checkErr := st.IsProcessed(context.Background(), "k")
	markErr := st.MarkProcessed(context.Background(), "k")
	for _, err := range []error{checkErr, markErr} {
		if !errors.Is(err, ErrClosed) || middleware.Classify(err) != middleware.Outage {
			t.Errorf("store call after Close: %v (%s), want an outage wrapping ErrClosed", err, middleware.Classify(err))
		}
	}
	if s.memStore != nil {
		t.Error("an in-memory store was created after Close")
		_ = s.memStore.Close()
	}
}
