package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/pgtest"
)

// TestOutage reaches PostgreSQL through a proxy and cuts it: calls fail
// with errors that wrap idempotency.ErrStoreUnavailable, including a first
// use that has to create its table; once the proxy is restored, the same
// stores work again.
func TestOutage(t *testing.T) {
	direct := pgtest.Pool(t)
	schema := pgtest.Schema(t, direct)
	pool, proxy := pgtest.ProxiedPool(t)
	s := newStore(t, pool, postgres.Config{Schema: schema})
	late := newStore(t, pool, postgres.Config{Schema: schema, Table: "late"})
	mustMark(t, s, "before")

	proxy.Cut()
	for name, call := range map[string]func(ctx context.Context) error{
		"IsProcessed":   func(ctx context.Context) error { _, err := s.IsProcessed(ctx, "before"); return err },
		"MarkProcessed": func(ctx context.Context) error { return s.MarkProcessed(ctx, "during") },
		"Cleanup":       func(ctx context.Context) error { _, err := s.Cleanup(ctx); return err },
		"first use":     func(ctx context.Context) error { return late.MarkProcessed(ctx, "during") },
		"BeginClaim": func(ctx context.Context) error {
			tx, _, err := s.BeginClaim(ctx, "during")
			if tx != nil {
				t.Errorf("BeginClaim returned a transaction with %v", err)
			}
			return err
		},
	} {
		err := callWithTimeout(call)
		if !errors.Is(err, idempotency.ErrStoreUnavailable) {
			t.Fatalf("%s during the outage: %v; want an error wrapping ErrStoreUnavailable", name, err)
		}
		if errs := unwrapAll(err); len(errs) != 2 || errs[1] == nil {
			t.Fatalf("%s: %v does not carry the underlying error beside the sentinel", name, err)
		}
	}
	if relationExists(t, direct, schema, "late") {
		t.Fatal("table created while the database was unreachable")
	}

	proxy.Restore()
	deadline := time.Now().Add(15 * time.Second)
	for callWithTimeout(func(ctx context.Context) error { return s.MarkProcessed(ctx, "after") }) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the store still fails 15 s after the database came back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !isProcessed(t, s, "before") || !isProcessed(t, s, "after") {
		t.Fatal("marks lost across the outage")
	}
	mustMark(t, late, "after")
	if !isProcessed(t, late, "after") || !relationExists(t, direct, schema, "late") {
		t.Fatal("the failed table creation was not retried")
	}
}

func callWithTimeout(call func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return call(ctx)
}

func unwrapAll(err error) []error {
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		return u.Unwrap()
	}
	return nil
}
