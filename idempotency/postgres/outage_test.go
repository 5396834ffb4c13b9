package postgres_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/pgtest"
	"github.com/koto-dev/watermill-koto/internal/tcpproxy"
)

// TestOutage reaches PostgreSQL through a proxy and cuts it: calls fail
// with errors that wrap idempotency.ErrStoreUnavailable, including a first
// use that has to create its table; once the proxy is restored, the same
// stores work again.
func TestOutage(t *testing.T) {
	direct := pgtest.Pool(t)
	schema := pgtest.Schema(t, direct)
	proxy, pool := proxiedPool(t)
	s := newStore(t, pool, postgres.Config{Schema: schema})
	late := newStore(t, pool, postgres.Config{Schema: schema, Table: "late"})
	mustMark(t, s, "before")

	proxy.Cut()
	for name, call := range map[string]func(ctx context.Context) error{
		"IsProcessed":   func(ctx context.Context) error { _, err := s.IsProcessed(ctx, "before"); return err },
		"MarkProcessed": func(ctx context.Context) error { return s.MarkProcessed(ctx, "during") },
		"Cleanup":       func(ctx context.Context) error { _, err := s.Cleanup(ctx); return err },
		"first use":     func(ctx context.Context) error { return late.MarkProcessed(ctx, "during") },
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

// proxiedPool returns a pool that reaches the test database through a
// proxy the test can cut.
func proxiedPool(t *testing.T) (*tcpproxy.Proxy, *pgxpool.Pool) {
	t.Helper()
	cfg := pgtest.Config(t)
	proxy, err := tcpproxy.Start(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	host, port, _ := net.SplitHostPort(proxy.Addr())
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	return proxy, pgtest.PoolWith(t, cfg)
}
