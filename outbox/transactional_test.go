package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/middleware"
)

// TestTransactionalHandlerPublishesThroughOutbox: in the transactional
// consumer mode the handler's context carries the claim's transaction, so
// an event published through a cqrs publisher on ContextPublisher is
// written in it: it commits with the handler, disappears with a failed
// handler's rollback, and a duplicate delivery writes nothing.
func TestTransactionalHandlerPublishesThroughOutbox(t *testing.T) {
	e := newEnv(t)
	mw, err := middleware.Idempotency(newStore(t, e), middleware.IdempotencyConfig{
		Transactional: true,
		Scope:         func(*message.Message) string { return "payments" },
	})
	if err != nil {
		t.Fatal(err)
	}
	events, err := cqrs.NewEventPublisher(e.o.ContextPublisher(), cqrs.EventPublisherConfig{Service: "payments"})
	if err != nil {
		t.Fatal(err)
	}
	errFail := errors.New("handler failed")
	fail := true
	handler := mw(func(msg *message.Message) ([]*message.Message, error) {
		if err := events.Publish(msg.Context(), OrderPaid{OrderID: string(msg.Payload)}); err != nil {
			return nil, err
		}
		if fail {
			return nil, errFail
		}
		return nil, nil
	})
	deliver := func() error {
		msg := message.NewMessage("0190c5a4-9d7e-7000-8000-000000000042", []byte("order-42"))
		msg.SetContext(context.Background())
		_, err := handler(msg)
		return err
	}

	if err := deliver(); !errors.Is(err, errFail) {
		t.Fatalf("failing handler: %v", err)
	}
	if n := e.rows(); n != 0 {
		t.Fatalf("%d outbox rows after the handler's rollback, want 0", n)
	}
	fail = false
	if err := deliver(); err != nil {
		t.Fatal(err)
	}
	if err := deliver(); err != nil { // the duplicate
		t.Fatal(err)
	}
	if n := e.rows(); n != 1 {
		t.Fatalf("%d outbox rows after a commit and a duplicate, want 1", n)
	}
}
