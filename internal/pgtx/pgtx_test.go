package pgtx_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/internal/pgtx"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// begin returns a real transaction, rolled back when the test ends.
func begin(t *testing.T) pgx.Tx {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, err := pgtest.Pool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// TestBindAndFrom: the context of Bind carries its transaction and unit;
// the parent context, and a context bound to no transaction, carry none.
func TestBindAndFrom(t *testing.T) {
	t.Parallel()
	tx := begin(t)
	parent := context.Background()
	ctx, u := pgtx.Bind(parent, tx)
	got, ok := pgtx.From(ctx)
	if !ok || got != u || got.Tx != tx {
		t.Fatalf("From(bound) = %p, %v; want the unit %p of the transaction", got, ok, u)
	}
	if _, ok := pgtx.From(parent); ok {
		t.Error("From(parent) reports a transaction")
	}
	nilCtx, _ := pgtx.Bind(parent, nil)
	if _, ok := pgtx.From(nilCtx); ok {
		t.Error("From(bound to a nil transaction) reports one")
	}
	var one int
	if err := u.Tx.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("the bound transaction does not answer: %d, %v", one, err)
	}
}

// TestAfterCommit: the functions run once, in order, at Committed and not
// before; registering after the commit fails with ErrCommitted.
func TestAfterCommit(t *testing.T) {
	t.Parallel()
	_, u := pgtx.Bind(context.Background(), begin(t))
	var ran []int
	for i := range 3 {
		if err := u.AfterCommit(func() { ran = append(ran, i) }); err != nil {
			t.Fatalf("AfterCommit %d: %v", i, err)
		}
	}
	if len(ran) != 0 {
		t.Fatalf("ran %v before the commit", ran)
	}
	u.Committed()
	u.Committed()
	if !slices.Equal(ran, []int{0, 1, 2}) {
		t.Errorf("ran %v, want [0 1 2] once", ran)
	}
	if err := u.AfterCommit(func() { ran = append(ran, 9) }); !errors.Is(err, pgtx.ErrCommitted) {
		t.Errorf("AfterCommit after the commit = %v, want ErrCommitted", err)
	}
	u.Committed()
	if len(ran) != 3 {
		t.Errorf("a function registered after the commit ran: %v", ran)
	}
}

// TestCounts: what one transaction wrote, counted from several goroutines,
// and the events published per key.
func TestCounts(t *testing.T) {
	t.Parallel()
	_, u := pgtx.Bind(context.Background(), begin(t))
	if n := u.Written(); n != 0 {
		t.Fatalf("Written before any write = %d", n)
	}
	if n, ok := u.Published("order-1"); ok || n != 0 {
		t.Fatalf("Published before any = %d, %v", n, ok)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			u.Wrote(2)
			u.SetPublished("order-1", 3)
		})
	}
	wg.Wait()
	if n := u.Written(); n != 16 {
		t.Errorf("Written = %d, want 16", n)
	}
	u.SetPublished("order-2", 0)
	for key, want := range map[string]int{"order-1": 3, "order-2": 0} {
		if n, ok := u.Published(key); !ok || n != want {
			t.Errorf("Published(%s) = %d, %v; want %d, true", key, n, ok, want)
		}
	}
	if _, ok := u.Published("order-3"); ok {
		t.Error("Published(order-3) reports events never published")
	}
}
