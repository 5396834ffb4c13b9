package middleware_test

import (
	"context"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// TestMarkOutlivesTheMessageContext: a router that closes cancels the
// contexts of the messages in its handlers. A handler that succeeded just
// before still gets its mark, so the redelivery after the restart is a
// duplicate instead of a second run.
func TestMarkOutlivesTheMessageContext(t *testing.T) {
	pool := pgtest.Pool(t)
	store := postgresStore(t, pool)
	dedup, err := middleware.Idempotency(store, middleware.IdempotencyConfig{
		Scope: func(*message.Message) string { return "closing" },
	})
	if err != nil {
		t.Fatal(err)
	}

	runs := 0
	h := dedup(func(msg *message.Message) ([]*message.Message, error) {
		runs++
		return nil, nil
	})
	deliver := func(cancelInHandler bool) error {
		msg := message.NewMessage(watermill.NewUUID(), nil)
		msg.UUID = "0190f5e2-7a3c-7d4e-9b1a-2c3d4e5f6a70"
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		msg.SetContext(ctx)
		inner := h
		if cancelInHandler {
			inner = dedup(func(m *message.Message) ([]*message.Message, error) {
				runs++
				cancel() // the router closes while the handler returns
				return nil, nil
			})
		}
		_, err := inner(msg)
		return err
	}
	if err := deliver(true); err != nil {
		t.Fatalf("delivery whose context ended as its handler returned: %v; want the mark to land", err)
	}
	if err := deliver(false); err != nil {
		t.Fatalf("redelivery: %v", err)
	}
	if runs != 1 {
		t.Errorf("handler ran %d times, want 1: the redelivery was not a duplicate", runs)
	}
}
