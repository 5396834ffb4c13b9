package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// TestTransactDeferredStatementKinds: under a deferred claim, QueryRow
// joins the claim's round trip and reads its row; statements that cannot
// join it (without arguments, Query, SendBatch) and a commit without any
// statement begin and claim first. Each commits with the claim; a
// duplicate's statement fails and the duplicate is reported. A failed
// statement rolls back and leaves no mark; a fn that fails before any
// statement sends nothing.
func TestTransactDeferredStatementKinds(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	pgtest.Exec(t, pool, "CREATE TABLE "+schema+".fx (v int)")
	s := newStore(t, pool, postgres.Config{Schema: schema})
	deferred := func(key string) idempotency.Claim { return idempotency.Claim{Key: key, Defer: true} }

	statements := map[string]func(ctx context.Context, tx pgx.Tx) error{
		"QueryRow": func(ctx context.Context, tx pgx.Tx) error {
			var v int
			if err := tx.QueryRow(ctx, "INSERT INTO "+schema+".fx VALUES ($1) RETURNING v", 7).Scan(&v); err != nil || v != 7 {
				return errors.Join(err, errors.New("wrong row"))
			}
			return nil
		},
		"Exec without arguments": func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO "+schema+".fx VALUES (1); INSERT INTO "+schema+".fx VALUES (2)")
			return err
		},
		"Query": func(ctx context.Context, tx pgx.Tx) error {
			rows, err := tx.Query(ctx, "SELECT v FROM "+schema+".fx")
			if err != nil {
				return err
			}
			rows.Close()
			return rows.Err()
		},
		"SendBatch": func(ctx context.Context, tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue("INSERT INTO "+schema+".fx VALUES ($1)", 3)
			return tx.SendBatch(ctx, b).Close()
		},
		"Commit alone": func(context.Context, pgx.Tx) error { return nil },
	}
	for name, run := range statements {
		t.Run(name, func(t *testing.T) {
			key := newUUIDKey()
			if claimed, err := inTx(t, s, deferred(key), run); err != nil || !claimed {
				t.Fatalf("Transact = %v, %v; want claimed", claimed, err)
			}
			if !isProcessed(t, s, key) {
				t.Fatal("no mark after the commit")
			}
			var stmtErr error
			claimed, err := inTx(t, s, deferred(key), func(ctx context.Context, tx pgx.Tx) error {
				stmtErr = run(ctx, tx)
				return stmtErr
			})
			if err != nil || claimed {
				t.Fatalf("Transact of a duplicate = %v, %v; want a duplicate", claimed, err)
			}
			if name != "Commit alone" && !errors.Is(stmtErr, postgres.ErrDuplicate) {
				t.Fatalf("a duplicate's statement returned %v, want ErrDuplicate", stmtErr)
			}
		})
	}

	t.Run("failed statement", func(t *testing.T) {
		key := newUUIDKey()
		claimed, err := inTx(t, s, deferred(key), func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO "+schema+".nosuchtable VALUES ($1)", 1)
			return err
		})
		if err == nil || !claimed || !strings.Contains(err.Error(), "nosuchtable") {
			t.Fatalf("Transact with a statement on a missing table = %v, %v; want claimed and its error", claimed, err)
		}
		if isProcessed(t, s, key) {
			t.Fatal("a rolled-back claim left a mark")
		}
	})

	t.Run("fn fails before any statement", func(t *testing.T) {
		key := newUUIDKey()
		acquired := pool.Stat().AcquireCount()
		boom := errors.New("boom")
		if _, err := s.Transact(ctxT(t), deferred(key), func(context.Context) error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("Transact = %v, want fn's error", err)
		}
		if n := pool.Stat().AcquireCount() - acquired; n != 0 {
			t.Fatalf("a fn that ran no statement took %d connections", n)
		}
		if isProcessed(t, s, key) {
			t.Fatal("a claim never sent left a mark")
		}
	})
}

// TestTransactDeferredStatementAlone: a first statement that pgx cannot
// send in the claim's batch (here its arguments do not match) does not
// fail the claim: it runs on its own after the claim, and fails with its
// own error, in a transaction that holds the claim and can go on; for a
// duplicate it reports the duplicate.
func TestTransactDeferredStatementAlone(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	pgtest.Exec(t, pool, "CREATE TABLE "+schema+".fx (v int)")
	s := newStore(t, pool, postgres.Config{Schema: schema})
	key := newUUIDKey()
	var aloneErr error
	fn := func(ctx context.Context, tx pgx.Tx) error {
		if _, aloneErr = tx.Exec(ctx, "SELECT $1::int", 1, 2); aloneErr == nil || errors.Is(aloneErr, postgres.ErrDuplicate) {
			return aloneErr
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+schema+".fx VALUES ($1)", 1)
		return err
	}
	claimed, err := inTx(t, s, idempotency.Claim{Key: key, Defer: true}, fn)
	if err != nil || !claimed {
		t.Fatalf("Transact = %v, %v; want claimed", claimed, err)
	}
	if aloneErr == nil || errors.Is(aloneErr, idempotency.ErrStoreUnavailable) || !strings.Contains(aloneErr.Error(), "argument") {
		t.Errorf("the statement that cannot join the batch returned %v, want its own argument error", aloneErr)
	}
	if !isProcessed(t, s, key) || pgtest.QueryInt(t, pool, "SELECT count(*) FROM "+schema+".fx") != 1 {
		t.Fatal("the claim and the write after the failed statement were not committed")
	}
	claimed, err = inTx(t, s, idempotency.Claim{Key: key, Defer: true}, fn)
	if err != nil || claimed || !errors.Is(aloneErr, postgres.ErrDuplicate) {
		t.Fatalf("Transact of a duplicate = %v, %v, its statement %v; want a duplicate and ErrDuplicate", claimed, err, aloneErr)
	}
}
