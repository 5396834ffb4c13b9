package middleware_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/middleware"
)

// effects is a table in a test schema where handlers record, in the
// transaction of the transactional middleware, that they handled a message.
// It has no unique constraint, so that a duplicate effect shows up as a
// second row instead of an error.
type effects struct {
	pool  *pgxpool.Pool // reads the table; need not be the handler's pool
	table string
}

func newEffects(t *testing.T, pool *pgxpool.Pool, schema string) *effects {
	t.Helper()
	e := &effects{pool: pool, table: pgx.Identifier{schema, "effects"}.Sanitize()}
	if _, err := pool.Exec(context.Background(), "CREATE TABLE "+e.table+" (id bigserial PRIMARY KEY, message_uuid text NOT NULL)"); err != nil {
		t.Fatalf("create effects table: %v", err)
	}
	return e
}

// insert records msg in the transaction the middleware put in its context.
func (e *effects) insert(msg *message.Message) error {
	ctx := msg.Context()
	tx, ok := postgres.TxFromContext(ctx)
	if !ok {
		return koto.Poison(errors.New("no transaction in the handler's context"))
	}
	_, err := tx.Exec(ctx, "INSERT INTO "+e.table+" (message_uuid) VALUES ($1)", msg.UUID)
	return err
}

// counts returns the number of rows and of distinct messages, or -1s when
// the database cannot answer.
func (e *effects) counts() (rows, distinct int) {
	err := e.pool.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT message_uuid) FROM "+e.table).Scan(&rows, &distinct)
	if err != nil {
		return -1, -1
	}
	return rows, distinct
}

// transactionalDefaults builds the recommended chain in the transactional
// mode with short backoffs; onDuplicate counts duplicates.
func transactionalDefaults(t *testing.T, pub message.Publisher, store *postgres.Store, logger *slog.Logger, duplicates *atomic.Int64) []message.HandlerMiddleware {
	t.Helper()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	mws := defaultsChain(t, middleware.Config{
		Publisher: pub,
		Store:     store,
		Logger:    logger,
		Idempotency: middleware.IdempotencyConfig{
			Transactional: true,
			OnDuplicate:   func(*message.Message, string, string) { duplicates.Add(1) },
		},
		DeadLetter: middleware.DeadLetterConfig{
			MaxAttempts: 3,
			Backoff:     koto.Backoff{InitialInterval: fastBackoff.initial, MaxInterval: 100 * time.Millisecond},
		},
	})
	return mws
}
