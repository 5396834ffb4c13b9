package postgres_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/pgtest"
)

// TestDeferClaimWithFirstStatement: the first statement of a ClaimTx
// carries BEGIN and the claim in one write to the server; its effects and
// the claim commit together. A second ClaimTx of the key then fails its
// first statement with ErrDuplicate, rolls it back, and holds nothing.
func TestDeferClaimWithFirstStatement(t *testing.T) {
	var writes atomic.Int64
	pool := countingPool(t, &writes, nil)
	schema := pgtest.Schema(t, pool)
	pgtest.Exec(t, pool, "CREATE TABLE "+schema+".fx (v int)")
	s := newStore(t, pool, postgres.Config{Schema: schema})
	insert := "INSERT INTO " + schema + ".fx VALUES ($1)"
	key := newUUIDKey()

	for i := range 2 { // the first on the connection also prepares the statements
		tx := s.DeferClaim(newUUIDKey(), nil)
		before := writes.Load()
		if _, err := tx.Exec(ctxT(t), insert, i); err != nil {
			t.Fatal(err)
		}
		if n := writes.Load() - before; i == 1 && n != 1 {
			t.Fatalf("BEGIN, claim and the first statement took %d writes, want 1", n)
		}
		if sent, claimed, err := tx.Outcome(); !sent || !claimed || err != nil {
			t.Fatalf("Outcome = %v, %v, %v; want sent and claimed", sent, claimed, err)
		}
		if err := tx.Commit(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}

	tx := s.DeferClaim(key, nil)
	if _, err := tx.Exec(ctxT(t), insert, 10); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !isProcessed(t, s, key) {
		t.Fatal("a committed ClaimTx left no mark")
	}

	dup := s.DeferClaim(key, nil)
	if _, err := dup.Exec(ctxT(t), insert, 20); !errors.Is(err, postgres.ErrDuplicate) {
		t.Fatalf("first statement of a duplicate: %v, want ErrDuplicate", err)
	}
	if sent, claimed, err := dup.Outcome(); !sent || claimed || err != nil {
		t.Fatalf("Outcome of a duplicate = %v, %v, %v; want sent, not claimed, no error", sent, claimed, err)
	}
	if err := dup.QueryRow(ctxT(t), "SELECT $1::int", 1).Scan(new(int)); !errors.Is(err, postgres.ErrDuplicate) {
		t.Fatalf("a later statement of a duplicate: %v, want ErrDuplicate", err)
	}
	lo := dup.LargeObjects()
	if _, err := lo.Create(ctxT(t), 0); err == nil {
		t.Fatal("a large object of a duplicate was created")
	}
	if conn := dup.Conn(); conn != nil {
		t.Fatal("a duplicate has a connection")
	}
	if err := dup.Commit(ctxT(t)); !errors.Is(err, postgres.ErrDuplicate) {
		t.Fatalf("Commit of a duplicate: %v, want ErrDuplicate", err)
	}
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d connections held after a duplicate", n)
	}
	if n := pgtest.QueryInt(t, pool, "SELECT count(*) FROM "+schema+".fx WHERE v = 20"); n != 0 {
		t.Fatalf("the duplicate's statement left %d rows", n)
	}
}

// TestDeferClaimStatementKinds: QueryRow joins the claim's round trip and
// reads its row; statements that cannot join it (without arguments, Query,
// SendBatch) begin and claim first. A failed statement aborts the
// transaction, and its rollback leaves no mark.
func TestDeferClaimStatementKinds(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	pgtest.Exec(t, pool, "CREATE TABLE "+schema+".fx (v int)")
	s := newStore(t, pool, postgres.Config{Schema: schema})

	statements := map[string]func(tx pgx.Tx) error{
		"QueryRow": func(tx pgx.Tx) error {
			var v int
			if err := tx.QueryRow(ctxT(t), "INSERT INTO "+schema+".fx VALUES ($1) RETURNING v", 7).Scan(&v); err != nil || v != 7 {
				return errors.Join(err, errors.New("wrong row"))
			}
			return nil
		},
		"Exec without arguments": func(tx pgx.Tx) error {
			_, err := tx.Exec(ctxT(t), "INSERT INTO "+schema+".fx VALUES (1); INSERT INTO "+schema+".fx VALUES (2)")
			return err
		},
		"Query": func(tx pgx.Tx) error {
			rows, err := tx.Query(ctxT(t), "SELECT v FROM "+schema+".fx")
			if err != nil {
				return err
			}
			rows.Close()
			return rows.Err()
		},
		"SendBatch": func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue("INSERT INTO "+schema+".fx VALUES ($1)", 3)
			return tx.SendBatch(ctxT(t), b).Close()
		},
		"Commit alone": func(pgx.Tx) error { return nil },
	}
	for name, run := range statements {
		t.Run(name, func(t *testing.T) {
			key := newUUIDKey()
			tx := s.DeferClaim(key, nil)
			if err := run(tx); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			if sent, claimed, err := tx.Outcome(); !sent || !claimed || err != nil {
				t.Fatalf("Outcome = %v, %v, %v; want sent and claimed", sent, claimed, err)
			}
			if !isProcessed(t, s, key) {
				t.Fatal("no mark after the commit")
			}
			again := s.DeferClaim(key, nil)
			if err := run(again); err == nil && name != "Commit alone" {
				t.Fatal("a duplicate's statement succeeded")
			}
			if err := again.Commit(ctxT(t)); !errors.Is(err, postgres.ErrDuplicate) {
				t.Fatalf("Commit of a duplicate: %v, want ErrDuplicate", err)
			}
		})
	}

	t.Run("failed statement", func(t *testing.T) {
		key := newUUIDKey()
		tx := s.DeferClaim(key, nil)
		if _, err := tx.Exec(ctxT(t), "INSERT INTO "+schema+".nosuchtable VALUES ($1)", 1); err == nil {
			t.Fatal("a statement on a missing table succeeded")
		}
		if err := tx.Rollback(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if isProcessed(t, s, key) {
			t.Fatal("a rolled-back ClaimTx left a mark")
		}
	})

	t.Run("rollback before any statement", func(t *testing.T) {
		tx := s.DeferClaim(newUUIDKey(), nil)
		if err := tx.Rollback(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if sent, _, _ := tx.Outcome(); sent {
			t.Fatal("a rollback before any statement sent something")
		}
		if _, err := tx.Exec(ctxT(t), "SELECT $1::int", 1); !errors.Is(err, pgx.ErrTxClosed) {
			t.Fatalf("statement after the rollback: %v, want ErrTxClosed", err)
		}
	})
}

// TestDeferClaimOutage: when the database is unreachable, the first
// statement fails with an error that wraps ErrStoreUnavailable, and so
// does Outcome.
func TestDeferClaimOutage(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	own, err := pgxpool.NewWithConfig(ctxT(t), pgtest.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, own, postgres.Config{Schema: schema})
	if err := s.EnsureSchema(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	own.Close()
	tx := s.DeferClaim(newUUIDKey(), nil)
	if _, err := tx.Exec(ctxT(t), "SELECT $1::int", 1); !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Fatalf("statement on a closed pool: %v, want ErrStoreUnavailable", err)
	}
	if sent, claimed, err := tx.Outcome(); !sent || claimed || !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Fatalf("Outcome = %v, %v, %v; want sent, not claimed, ErrStoreUnavailable", sent, claimed, err)
	}
}
