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

type claim struct {
	claimed bool
	err     error
}

// TestMarkProcessedTxConcurrentClaims: while one transaction holds a claim,
// a second claim of the same key waits; it gets false when the first
// commits and true when it rolls back.
func TestMarkProcessedTxConcurrentClaims(t *testing.T) {
	pool := pgtest.Pool(t)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	if err := s.EnsureSchema(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		end         func(pgx.Tx, context.Context) error
		wantClaimed bool
	}{
		{"commit", pgx.Tx.Commit, false},
		{"rollback", pgx.Tx.Rollback, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := newUUIDKey()
			first := begin(t, pool)
			if claimed, err := s.MarkProcessedTx(ctxT(t), first, key); err != nil || !claimed {
				t.Fatalf("first claim = %v, %v; want true", claimed, err)
			}
			second := begin(t, pool)
			result := make(chan claim, 1)
			go func() {
				claimed, err := s.MarkProcessedTx(ctxT(t), second, key)
				result <- claim{claimed, err}
			}()
			waitForLockWait(t, pool, second.Conn().PgConn().PID())
			select {
			case r := <-result:
				t.Fatalf("second claim returned %+v while the first transaction was open", r)
			default:
			}
			if err := c.end(first, ctxT(t)); err != nil {
				t.Fatal(err)
			}
			r := <-result
			if r.err != nil || r.claimed != c.wantClaimed {
				t.Fatalf("second claim after %s = %v, %v; want %v", c.name, r.claimed, r.err, c.wantClaimed)
			}
			if err := second.Commit(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			if !isProcessed(t, s, key) {
				t.Fatal("key not processed after a committed claim")
			}
		})
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

// waitForLockWait polls the catalog until the backend pid waits for a lock.
func waitForLockWait(t *testing.T, pool *pgxpool.Pool, pid uint32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for queryInt(t, pool, "SELECT count(*) FROM pg_locks WHERE pid = $1 AND NOT granted", int32(pid)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second claim never waited for a lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
