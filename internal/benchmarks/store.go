package benchmarks

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
)

// StoreCheckMark measures what a consumer does per new message through an
// idempotency.Store: IsProcessed, then MarkProcessed, for a new UUIDv7 key
// each time, from callers concurrent goroutines.
func StoreCheckMark(b *testing.B, store idempotency.Store, callers int) {
	runCallers(b, callers, storeOp(store))
}

// RawPgxCheckMark does what StoreCheckMark does with the store's own two
// statements issued straight through pgx on pool: the baseline the
// PostgreSQL store is measured against.
func RawPgxCheckMark(b *testing.B, pool *pgxpool.Pool, stmts postgres.Statements, callers int) {
	runCallers(b, callers, rawOp(pool, stmts))
}

func storeOp(store idempotency.Store) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		key := uuid.Must(uuid.NewV7()).String()
		done, err := store.IsProcessed(ctx, key)
		if err != nil || done {
			return err
		}
		return store.MarkProcessed(ctx, key)
	}
}

func rawOp(pool *pgxpool.Pool, stmts postgres.Statements) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		id := pgtype.UUID{Bytes: uuid.Must(uuid.NewV7()), Valid: true}
		var done bool
		if err := pool.QueryRow(ctx, stmts.IsProcessed, id).Scan(&done); err != nil || done {
			return err
		}
		_, err := pool.Exec(ctx, stmts.MarkProcessed, id)
		return err
	}
}
