package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/pgtest"
)

// claimFunc claims key in a transaction of its own, as MarkProcessedTx in
// a transaction of the caller's or BeginClaim do; tx is nil when nothing
// is left open.
type claimFunc func(t *testing.T, key string) (tx pgx.Tx, claimed bool, err error)

// TestConcurrentClaims: while one transaction holds a claim, a second
// claim of the same key waits; it is a duplicate when the first commits
// and claims when it rolls back. Both MarkProcessedTx and BeginClaim.
func TestConcurrentClaims(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	s := newStore(t, pool, postgres.Config{Schema: schema})
	if err := s.EnsureSchema(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	claimers := map[string]claimFunc{
		"MarkProcessedTx": func(t *testing.T, key string) (pgx.Tx, bool, error) {
			tx := begin(t, pool)
			claimed, err := s.MarkProcessedTx(ctxT(t), tx, key)
			return tx, claimed, err
		},
		"BeginClaim": func(t *testing.T, key string) (pgx.Tx, bool, error) { return s.BeginClaim(ctxT(t), key) },
	}
	for name, claim := range claimers {
		for _, c := range []struct {
			end         string
			endTx       func(pgx.Tx, context.Context) error
			wantClaimed bool
		}{
			{"commit", pgx.Tx.Commit, false},
			{"rollback", pgx.Tx.Rollback, true},
		} {
			t.Run(name+"/"+c.end, func(t *testing.T) {
				key := newUUIDKey()
				first, claimed, err := claim(t, key)
				if err != nil || !claimed {
					t.Fatalf("first claim = %v, %v; want true", claimed, err)
				}
				type result struct {
					tx      pgx.Tx
					claimed bool
					err     error
				}
				second := make(chan result, 1)
				go func() {
					tx, claimed, err := claim(t, key)
					second <- result{tx, claimed, err}
				}()
				waitForClaimWait(t, pool, schema)
				select {
				case r := <-second:
					t.Fatalf("second claim returned %+v while the first transaction was open", r)
				default:
				}
				if err := c.endTx(first, ctxT(t)); err != nil {
					t.Fatal(err)
				}
				r := <-second
				if r.err != nil || r.claimed != c.wantClaimed {
					t.Fatalf("second claim after %s = %v, %v; want %v", c.end, r.claimed, r.err, c.wantClaimed)
				}
				if r.tx != nil {
					if err := r.tx.Commit(ctxT(t)); err != nil {
						t.Fatal(err)
					}
				}
				if !isProcessed(t, s, key) {
					t.Fatal("key not processed after a committed claim")
				}
			})
		}
	}
}

func TestMarkProcessedTxClaimsExpiredMark(t *testing.T) {
	pool := pgtest.Pool(t)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool), Window: time.Hour})
	mustMark(t, s, "fresh", "expired")
	ageMark(t, pool, s, "expired", 2*time.Hour)

	tx := begin(t, pool)
	if claimed, err := s.MarkProcessedTx(ctxT(t), tx, "fresh"); err != nil || claimed {
		t.Fatalf("claim of a fresh mark = %v, %v; want false (a duplicate)", claimed, err)
	}
	if claimed, err := s.MarkProcessedTx(ctxT(t), tx, "expired"); err != nil || !claimed {
		t.Fatalf("claim of an expired mark = %v, %v; want true", claimed, err)
	}
	if claimed, err := s.MarkProcessedTx(ctxT(t), tx, "new"); err != nil || !claimed {
		t.Fatalf("claim of a new key = %v, %v; want true", claimed, err)
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !isProcessed(t, s, "expired") || !isProcessed(t, s, "new") {
		t.Fatal("committed claims are not processed")
	}
}

func TestMarkProcessedTxRollbackLeavesNoMark(t *testing.T) {
	pool := pgtest.Pool(t)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	tx := begin(t, pool)
	if claimed, err := s.MarkProcessedTx(ctxT(t), tx, "k"); err != nil || !claimed {
		t.Fatalf("claim = %v, %v", claimed, err)
	}
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if isProcessed(t, s, "k") {
		t.Fatal("a rolled back claim left a mark")
	}
	if _, err := s.MarkProcessedTx(ctxT(t), nil, "k"); err == nil {
		t.Fatal("MarkProcessedTx with a nil transaction did not fail")
	}
}

func TestTxContext(t *testing.T) {
	if _, ok := postgres.TxFromContext(context.Background()); ok {
		t.Fatal("a bare context carries a transaction")
	}
	pool := pgtest.Pool(t)
	tx := begin(t, pool)
	got, ok := postgres.TxFromContext(postgres.ContextWithTx(context.Background(), tx))
	if !ok || got != tx {
		t.Fatal("TxFromContext does not return the transaction ContextWithTx stored")
	}
	if _, ok := postgres.TxFromContext(postgres.ContextWithTx(context.Background(), nil)); ok {
		t.Fatal("a nil transaction is reported as present")
	}
}

func begin(t *testing.T, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	tx, err := pool.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// waitForClaimWait polls the catalog until a session waits for a lock
// while running a statement on schema: a claim blocked on another.
func waitForClaimWait(t *testing.T, pool *pgxpool.Pool, schema string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	const waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position($1 in query) > 0"
	for pgtest.QueryInt(t, pool, waiting, schema) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second claim never waited for a lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
