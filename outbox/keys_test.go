package outbox_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/internal/pgschema"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
)

// keyLocks is an outbox for LockKeys alone: a pool and a description of
// a table, which key locks never touch.
func keyLocks(t *testing.T) (*pgxpool.Pool, *outbox.Outbox) {
	t.Helper()
	pool := pgtest.Pool(t)
	o, err := outbox.New(pool, outbox.Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	return pool, o
}

// TestLockKeysApartFromApplicationLocks: an application holds the
// single-bigint advisory locks an outbox key could be mistaken for, the
// hashtextextended one earlier versions took and the bigint of the key's
// own two halves; LockKeys of that key takes its lock at once.
func TestLockKeysApartFromApplicationLocks(t *testing.T) {
	pool, o := keyLocks(t)
	ctx := kototest.Context(t)
	key := pgtest.Name("key") // the database's locks are shared with other tests
	app, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Release()
	pgtest.Exec(t, app, "SELECT pg_advisory_lock(hashtextextended($1, 7021902153413407835))", key)
	pgtest.Exec(t, app, "SELECT pg_advisory_lock(($1::bigint << 32) | (hashtext($2)::bigint & 4294967295))", pgschema.ClassKey, key)
	defer pgtest.Exec(t, app, "SELECT pg_advisory_unlock_all()")

	tx := beginOn(t, pool)
	pgtest.Exec(t, tx, "SET LOCAL lock_timeout = '5s'") // a wait fails rather than hangs
	if err := o.LockKeys(ctx, tx, key); err != nil {
		t.Fatalf("LockKeys waited for the application's advisory lock: %v", err)
	}
	if n := keyLocksOf(t, pool, key, true); n != 1 {
		t.Fatalf("%d granted locks (ClassKey, hashtext(key)); want the transaction's one", n)
	}
}

// TestLockKeysSerialiseOneKey: a second transaction locking a key that a
// first one holds waits in PostgreSQL's lock queue until the first
// commits.
func TestLockKeysSerialiseOneKey(t *testing.T) {
	pool, o := keyLocks(t)
	ctx := kototest.Context(t)
	key := pgtest.Name("key")
	first := beginOn(t, pool)
	if err := o.LockKeys(ctx, first, key, pgtest.Name("other")); err != nil {
		t.Fatal(err)
	}
	second := beginOn(t, pool)
	locked := make(chan error, 1)
	go func() { locked <- o.LockKeys(ctx, second, key) }()

	kototest.WaitFor(t, "the second transaction to wait for the key's lock", func() bool {
		return keyLocksOf(t, pool, key, false) == 1
	})
	select {
	case err := <-locked:
		t.Fatalf("LockKeys returned (%v) while another transaction holds the key", err)
	default:
	}
	commit(t, first)
	if err := <-locked; err != nil {
		t.Fatalf("LockKeys after the first transaction committed: %v", err)
	}
	if n := keyLocksOf(t, pool, key, true); n != 1 {
		t.Fatalf("%d granted locks of the key after the handover, want 1", n)
	}
}

// keyLocksOf counts the advisory locks (ClassKey, hashtext(key)) of the
// database that are granted, or waited for.
func keyLocksOf(t *testing.T, pool *pgxpool.Pool, key string, granted bool) int64 {
	t.Helper()
	return pgtest.QueryInt(t, pool, `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 2 AND granted = $3
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND classid = $1::int4::oid AND objid = hashtext($2)::oid`, pgschema.ClassKey, key, granted)
}

// beginOn begins a transaction on pool, rolled back when the test ends if
// it is still open.
func beginOn(t *testing.T, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	tx, err := pool.Begin(kototest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}
