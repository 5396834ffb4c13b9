package postgres

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// claimTxStore returns a store in a schema of its own whose table exists,
// and its pool.
func claimTxStore(t *testing.T) (*Store, *pgxpool.Pool, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	pool := pgtest.Pool(t)
	s, err := NewStore(pool, Config{Schema: pgtest.Schema(t, pool), CleanupInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.EnsureSchema(ctx); err != nil {
		t.Fatal(err)
	}
	return s, pool, ctx
}

// TestClaimTxOutcome: a claimTx reports nothing sent until its first
// statement, then whether that statement's batch claimed.
func TestClaimTxOutcome(t *testing.T) {
	s, _, ctx := claimTxStore(t)
	tx := s.deferClaim("0190f5e2-7a3c-7d4e-9b1a-2c3d4e5f6a7b", nil)
	if sent, claimed, err := tx.Outcome(); sent || claimed || err != nil || tx.Open() != nil {
		t.Fatalf("Outcome before any statement = %v, %v, %v; want nothing sent, nothing open", sent, claimed, err)
	}
	if _, err := tx.Exec(ctx, "SELECT $1::int", 1); err != nil {
		t.Fatal(err)
	}
	if sent, claimed, err := tx.Outcome(); !sent || !claimed || err != nil || tx.Open() == nil {
		t.Fatalf("Outcome after the first statement = %v, %v, %v; want sent and claimed, open", sent, claimed, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestClaimTxDuplicate: every method of a duplicate's claimTx fails with
// ErrDuplicate or holds nothing, and no connection is left held.
func TestClaimTxDuplicate(t *testing.T) {
	s, pool, ctx := claimTxStore(t)
	const key = "0190f5e2-7a3c-7d4e-9b1a-2c3d4e5f6a7b"
	if err := s.MarkProcessed(ctx, key); err != nil {
		t.Fatal(err)
	}
	dup := s.deferClaim(key, nil)
	if _, err := dup.Exec(ctx, "SELECT $1::int", 1); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("first statement of a duplicate: %v, want ErrDuplicate", err)
	}
	if sent, claimed, err := dup.Outcome(); !sent || claimed || err != nil || dup.Open() != nil {
		t.Fatalf("Outcome of a duplicate = %v, %v, %v; want sent, not claimed, no error, nothing open", sent, claimed, err)
	}
	for name, call := range map[string]func() error{
		"QueryRow": func() error { return dup.QueryRow(ctx, "SELECT $1::int", 1).Scan(new(int)) },
		"Exec":     func() error { _, err := dup.Exec(ctx, "SELECT 1"); return err },
		"Query":    func() error { _, err := dup.Query(ctx, "SELECT 1"); return err },
		"SendBatch": func() error {
			b := &pgx.Batch{}
			b.Queue("SELECT 1")
			return dup.SendBatch(ctx, b).Close()
		},
		"CopyFrom": func() error {
			_, err := dup.CopyFrom(ctx, pgx.Identifier{"t"}, []string{"v"}, pgx.CopyFromRows(nil))
			return err
		},
		"Prepare": func() error { _, err := dup.Prepare(ctx, "p", "SELECT 1"); return err },
		"Begin":   func() error { _, err := dup.Begin(ctx); return err },
		"Commit":  func() error { return dup.Commit(ctx) },
	} {
		if err := call(); !errors.Is(err, ErrDuplicate) {
			t.Errorf("%s of a duplicate: %v, want ErrDuplicate", name, err)
		}
	}
	lo := dup.LargeObjects()
	if _, err := lo.Create(ctx, 0); err == nil {
		t.Error("a large object of a duplicate was created")
	}
	if conn := dup.Conn(); conn != nil {
		t.Error("a duplicate has a connection")
	}
	if err := dup.Rollback(ctx); !errors.Is(err, pgx.ErrTxClosed) {
		t.Errorf("Rollback of a duplicate: %v, want ErrTxClosed", err)
	}
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d connections held after a duplicate", n)
	}
}

// TestClaimTxRollbackBeforeAnyStatement: a rollback before any statement
// sends nothing, and closes the claimTx.
func TestClaimTxRollbackBeforeAnyStatement(t *testing.T) {
	s, pool, ctx := claimTxStore(t)
	acquired := pool.Stat().AcquireCount()
	tx := s.deferClaim("0190f5e2-7a3c-7d4e-9b1a-2c3d4e5f6a7b", nil)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if sent, _, _ := tx.Outcome(); sent || pool.Stat().AcquireCount() != acquired {
		t.Fatal("a rollback before any statement sent something")
	}
	if _, err := tx.Exec(ctx, "SELECT $1::int", 1); !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatalf("statement after the rollback: %v, want ErrTxClosed", err)
	}
	if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatalf("Commit after the rollback: %v, want ErrTxClosed", err)
	}
	if err := tx.Rollback(ctx); !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatalf("second Rollback: %v, want ErrTxClosed", err)
	}
}
