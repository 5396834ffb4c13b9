package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// claimFunc claims key in a transaction of its own and holds it until end
// is called, which commits or rolls back; end is nil for a duplicate.
type claimFunc func(t *testing.T, key string) (claimed bool, end func(commit bool) error, err error)

// markProcessedTx claims with MarkProcessedTx in a transaction of the
// caller's.
func markProcessedTx(pool *pgxpool.Pool, s *postgres.Store) claimFunc {
	return func(t *testing.T, key string) (bool, func(bool) error, error) {
		tx := begin(t, pool)
		claimed, err := s.MarkProcessedTx(ctxT(t), tx, key)
		end := func(commit bool) error {
			if commit {
				return tx.Commit(ctxT(t))
			}
			return tx.Rollback(ctxT(t))
		}
		return claimed, end, err
	}
}

// errRollBack is what a held Transact's fn returns to roll back.
var errRollBack = errors.New("roll back")

// transactHeld claims with Transact, whose fn (after a first statement,
// which sends a deferred claim) waits for end.
func transactHeld(s *postgres.Store, deferred bool) claimFunc {
	return func(t *testing.T, key string) (bool, func(bool) error, error) {
		inFn := make(chan struct{})
		commit := make(chan bool, 1)
		done := make(chan error, 1)
		var claimed bool
		go func() {
			var err error
			claimed, err = inTx(t, s, idempotency.Claim{Key: key, Defer: deferred}, func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "SELECT $1::int", 1); err != nil {
					return err
				}
				close(inFn)
				if !<-commit {
					return errRollBack
				}
				return nil
			})
			done <- err
		}()
		select {
		case <-inFn:
		case err := <-done:
			return claimed, nil, err
		}
		return true, func(c bool) error {
			commit <- c
			if err := <-done; err != nil && !errors.Is(err, errRollBack) {
				return err
			}
			return nil
		}, nil
	}
}

// TestConcurrentClaims: while one transaction holds a claim, a second
// claim of the same key waits; it is a duplicate when the first commits
// and claims when it rolls back. MarkProcessedTx, and Transact in both
// modes.
func TestConcurrentClaims(t *testing.T) {
	for _, c := range []struct {
		end         string
		commit      bool
		wantClaimed bool
	}{
		{"commit", true, false},
		{"rollback", false, true},
	} {
		for _, name := range []string{"MarkProcessedTx", "Transact", "Transact deferred"} {
			t.Run(name+"/"+c.end, func(t *testing.T) {
				t.Parallel()
				pool := pgtest.Pool(t)
				schema := pgtest.Schema(t, pool)
				s := newStore(t, pool, postgres.Config{Schema: schema})
				if err := s.EnsureSchema(ctxT(t)); err != nil {
					t.Fatal(err)
				}
				claim := map[string]claimFunc{
					"MarkProcessedTx":   markProcessedTx(pool, s),
					"Transact":          transactHeld(s, false),
					"Transact deferred": transactHeld(s, true),
				}[name]
				key := newUUIDKey()
				claimed, endFirst, err := claim(t, key)
				if err != nil || !claimed {
					t.Fatalf("first claim = %v, %v; want true", claimed, err)
				}
				type result struct {
					claimed bool
					end     func(bool) error
					err     error
				}
				second := make(chan result, 1)
				go func() {
					claimed, end, err := claim(t, key)
					second <- result{claimed, end, err}
				}()
				waitForClaimWait(t, pool, schema)
				select {
				case r := <-second:
					t.Fatalf("second claim returned %+v while the first transaction was open", r)
				default:
				}
				if err := endFirst(c.commit); err != nil {
					t.Fatal(err)
				}
				r := <-second
				if r.err != nil || r.claimed != c.wantClaimed {
					t.Fatalf("second claim after %s = %v, %v; want %v", c.end, r.claimed, r.err, c.wantClaimed)
				}
				if r.claimed {
					if err := r.end(true); err != nil {
						t.Fatal(err)
					}
				} else if name == "MarkProcessedTx" {
					_ = r.end(false)
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

// TestTxFromContext: the context of Transact's fn carries the transaction
// that holds the claim, in both modes; a bare context carries none.
func TestTxFromContext(t *testing.T) {
	if _, ok := postgres.TxFromContext(context.Background()); ok {
		t.Fatal("a bare context carries a transaction")
	}
	pool := pgtest.Pool(t)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	for _, m := range modes {
		key := newUUIDKey()
		var inside int64
		claimed, err := inTx(t, s, idempotency.Claim{Key: key, Defer: m.deferred}, func(ctx context.Context, tx pgx.Tx) error {
			return tx.QueryRow(ctx, "SELECT count(*) FROM "+s.Table()+" WHERE message_id = $1", keyUUID(key)).Scan(&inside)
		})
		if err != nil || !claimed || inside != 1 {
			t.Errorf("%s: the transaction of fn's context sees %d uncommitted claims of its key (%v, %v); want 1", m.name, inside, claimed, err)
		}
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
