package benchmarks

import (
	"context"
	"fmt"
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
// statements (sql) issued straight through pgx on pool: the baseline the
// PostgreSQL store is measured against.
func RawPgxCheckMark(b *testing.B, pool *pgxpool.Pool, sql CheckMarkSQL, callers int) {
	runCallers(b, callers, rawOp(pool, sql))
}

// CheckMarkSQL is the SQL a PostgreSQL store sends for IsProcessed and
// MarkProcessed; $1 is the key's idempotency.KeyUUID.
type CheckMarkSQL struct {
	Check, Mark string
}

// StoreSQL writes out the statements of store from its table and window,
// the same text as the store's: the test of the store's hot path checks
// that they are what the store sends.
func StoreSQL(store *postgres.Store) CheckMarkSQL {
	table, window := store.Table(), windowSQL(store)
	return CheckMarkSQL{
		Check: "SELECT EXISTS (SELECT 1 FROM " + table +
			" WHERE message_id = $1 AND processed_at > now() - " + window + ")",
		Mark: "WITH async AS (SELECT set_config('synchronous_commit', 'off', true))" +
			" INSERT INTO " + table + " AS m (message_id) SELECT $1::uuid FROM async" +
			" ON CONFLICT (message_id) DO UPDATE SET processed_at = now()" +
			" WHERE m.processed_at <= now() - " + window,
	}
}

// windowSQL writes out the window of store's marks as its statements do.
func windowSQL(store *postgres.Store) string {
	return fmt.Sprintf("interval '%d microseconds'", store.Window().Microseconds())
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

func rawOp(pool *pgxpool.Pool, sql CheckMarkSQL) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		id := pgtype.UUID{Bytes: uuid.Must(uuid.NewV7()), Valid: true}
		var done bool
		if err := pool.QueryRow(ctx, sql.Check, id).Scan(&done); err != nil || done {
			return err
		}
		_, err := pool.Exec(ctx, sql.Mark, id)
		return err
	}
}
