package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// TestMarkLeavesSessionSettings: MarkProcessed commits its mark without
// waiting for the WAL flush, with synchronous_commit off for its own
// transaction only; the session's setting is the same after it, and
// MarkProcessedTx does not change the setting of the caller's transaction.
func TestMarkLeavesSessionSettings(t *testing.T) {
	cfg := pgtest.Config(t)
	cfg.MaxConns = 1 // every call below runs on the same session
	pool := pgtest.PoolWith(t, cfg)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	pgtest.Exec(t, pool, "SET synchronous_commit = remote_write")
	show := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		t.Helper()
		var v string
		if err := q.QueryRow(ctxT(t), "SHOW synchronous_commit").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	key := newUUIDKey()
	mustMark(t, s, key, key)
	if !isProcessed(t, s, key) {
		t.Fatal("the mark is not visible after MarkProcessed returned")
	}
	if v := show(pool); v != "remote_write" {
		t.Fatalf("session synchronous_commit after MarkProcessed = %q, want remote_write", v)
	}

	tx, err := pool.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctxT(t)) }()
	if claimed, err := s.MarkProcessedTx(ctxT(t), tx, newUUIDKey()); err != nil || !claimed {
		t.Fatalf("MarkProcessedTx = %v, %v; want true", claimed, err)
	}
	if v := show(tx); v != "remote_write" {
		t.Fatalf("transaction's synchronous_commit after MarkProcessedTx = %q, want remote_write", v)
	}
}
