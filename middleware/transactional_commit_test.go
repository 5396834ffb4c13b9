package middleware_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// TestTransactionalAbortedCommitIsAnError: a handler that ignores a failed
// statement and returns nil leaves an aborted transaction, which
// PostgreSQL rolls back at commit. The middleware reports that as an
// ordinary error, retryable rather than an outage, and neither the effect
// nor the claim is kept.
func TestTransactionalAbortedCommitIsAnError(t *testing.T) {
	e := newRaceEnv(t)
	handler := e.wrap(t, func(msg *message.Message) error {
		if err := e.fx.insert(msg); err != nil {
			return err
		}
		tx, _ := postgres.TxFromContext(msg.Context())
		_, _ = tx.Exec(msg.Context(), "SELECT 1/0") // the error is dropped: a handler bug
		return nil
	})
	msg := newMessages(1)[0]
	_, err := handler(msg)
	if !errors.Is(err, pgx.ErrTxCommitRollback) || koto.ClassOf(err) != koto.ClassRetryable {
		t.Fatalf("handler = %v (class %v), want pgx.ErrTxCommitRollback, retryable", err, koto.ClassOf(err))
	}
	if rows, _ := e.fx.counts(); rows != 0 {
		t.Errorf("%d effect rows kept from a rolled-back transaction", rows)
	}
	done, err := e.store.IsProcessed(context.Background(), idempotency.ScopedKey("race", msg.UUID))
	if err != nil || done {
		t.Errorf("claim kept from a rolled-back transaction: IsProcessed = %v, %v", done, err)
	}
}

// TestTransactionalPanicRollsBack: a handler that panics after its write
// leaves neither the write nor the claim, and gives its connection back to
// the pool; so do duplicates and failures.
func TestTransactionalPanicRollsBack(t *testing.T) {
	e := newRaceEnv(t)
	var fail atomic.Int64 // 1: return an error, 2: panic
	handler := e.wrap(t, func(msg *message.Message) error {
		if err := e.fx.insert(msg); err != nil {
			return err
		}
		switch fail.Load() {
		case 1:
			return errors.New("failed after writing")
		case 2:
			panic("boom")
		}
		return nil
	})
	msg := newMessages(1)[0]
	fail.Store(2)
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Errorf("recovered %v, want the handler's panic", v)
			}
		}()
		_, _ = handler(msg)
	}()
	fail.Store(1)
	if _, err := handler(kototest.Republish(msg)); err == nil {
		t.Error("a failing handler's error was dropped")
	}
	fail.Store(0)
	for range 2 { // handled, then a duplicate
		if _, err := handler(kototest.Republish(msg)); err != nil {
			t.Fatal(err)
		}
	}
	if rows, _ := e.fx.counts(); rows != 1 || e.duplicates.Load() != 1 {
		t.Errorf("%d effect rows and %d duplicates, want 1 of each", rows, e.duplicates.Load())
	}
	if n := e.pool.Stat().AcquiredConns(); n != 0 {
		t.Errorf("%d connections still acquired", n)
	}
}

// TestTransactionalRefusesReturnedMessages: a handler that returns messages
// is rolled back and its message made poison, since the router's publish
// after the commit could fail with nothing to retry it.
func TestTransactionalRefusesReturnedMessages(t *testing.T) {
	e := newRaceEnv(t)
	mw, err := middleware.Idempotency(e.store, middleware.IdempotencyConfig{Transactional: true})
	if err != nil {
		t.Fatal(err)
	}
	handler := mw(func(msg *message.Message) ([]*message.Message, error) {
		if err := e.fx.insert(msg); err != nil {
			return nil, err
		}
		return []*message.Message{message.NewMessage("receipt", nil)}, nil
	})
	// What it returns beside the error is the handler's own; the router
	// publishes nothing of a delivery that failed.
	_, err = handler(newMessages(1)[0])
	if !errors.Is(err, middleware.ErrReturnedMessagesInTx) || koto.ClassOf(err) != koto.ClassPoison {
		t.Fatalf("handler returning messages: %v (class %v), want ErrReturnedMessagesInTx as poison", err, koto.ClassOf(err))
	}
	if rows, claims := e.fx.counts(); rows != 0 || claims != 0 {
		t.Errorf("%d effect rows and %d claims committed, want none", rows, claims)
	}
}
