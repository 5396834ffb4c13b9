package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
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
		"Transact": func(ctx context.Context) error {
			claimed, err := s.Transact(ctx, idempotency.Claim{Key: "during"}, func(context.Context) error {
				t.Error("Transact ran fn without its claim")
				return nil
			})
			if claimed {
				t.Errorf("Transact claimed with %v", err)
			}
			return err
		},
		"Transact deferred": func(ctx context.Context) error {
			var stmtErr error
			claimed, err := s.Transact(ctx, idempotency.Claim{Key: "during", Defer: true}, func(ctx context.Context) error {
				tx, _ := postgres.TxFromContext(ctx)
				_, stmtErr = tx.Exec(ctx, "SELECT $1::int", 1)
				return stmtErr
			})
			if claimed || !errors.Is(stmtErr, idempotency.ErrStoreUnavailable) {
				t.Errorf("Transact deferred = %v, %v; fn's first statement %v; want no claim, and ErrStoreUnavailable in fn too", claimed, err, stmtErr)
			}
			return err
		},
	} {
		err := callWithTimeout(call)
		if !errors.Is(err, idempotency.ErrStoreUnavailable) || koto.ClassOf(err) != koto.ClassOutage {
			t.Fatalf("%s during the outage: %v (%v); want an outage wrapping ErrStoreUnavailable", name, err, koto.ClassOf(err))
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

// unwrapAll returns the errors that the first join in err's chain joins:
// the sentinel and the underlying error, below the outage marks.
func unwrapAll(err error) []error {
	for err != nil {
		if u, ok := err.(interface{ Unwrap() []error }); ok {
			return u.Unwrap()
		}
		err = errors.Unwrap(err)
	}
	return nil
}

// TestTransactOnClosedPool: when the database cannot be reached, Transact
// fails with an outage that wraps ErrStoreUnavailable, in both modes, and
// so does fn's first statement under a deferred claim.
func TestTransactOnClosedPool(t *testing.T) {
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
	for _, m := range modes {
		var stmtErr error
		claimed, err := inTx(t, s, idempotency.Claim{Key: newUUIDKey(), Defer: m.deferred}, func(ctx context.Context, tx pgx.Tx) error {
			_, stmtErr = tx.Exec(ctx, "SELECT $1::int", 1)
			return stmtErr
		})
		if claimed || !errors.Is(err, idempotency.ErrStoreUnavailable) || koto.ClassOf(err) != koto.ClassOutage {
			t.Errorf("%s: Transact on a closed pool = %v, %v; want an outage wrapping ErrStoreUnavailable", m.name, claimed, err)
		}
		if m.deferred && !errors.Is(stmtErr, idempotency.ErrStoreUnavailable) {
			t.Errorf("%s: fn's first statement on a closed pool: %v, want ErrStoreUnavailable", m.name, stmtErr)
		}
	}
}

// TestTransactBrokenConnection: once the connection of the transaction
// broke, fn's failed statement and the failed commit are outages; a
// statement that fails on a live connection, or a commit that PostgreSQL
// turns into a rollback, is not.
func TestTransactBrokenConnection(t *testing.T) {
	pool := pgtest.Pool(t)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	if err := s.EnsureSchema(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	kill := func(ctx context.Context, tx pgx.Tx) {
		pgtest.Exec(t, pool, "SELECT pg_terminate_backend($1)", tx.Conn().PgConn().PID())
	}
	cases := []struct {
		name string
		fn   func(ctx context.Context, tx pgx.Tx) error
		want koto.Class
	}{
		{"statement after the connection broke", func(ctx context.Context, tx pgx.Tx) error {
			kill(ctx, tx)
			_, err := tx.Exec(ctx, "SELECT $1::int", 1)
			return err
		}, koto.ClassOutage},
		{"commit after the connection broke", func(ctx context.Context, tx pgx.Tx) error {
			kill(ctx, tx)
			return nil
		}, koto.ClassOutage},
		{"failed statement on a live connection", func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "SELECT 1 / $1::int", 0)
			return err
		}, koto.ClassRetryable},
		{"commit of a transaction whose failed statement fn ignored", func(ctx context.Context, tx pgx.Tx) error {
			_, _ = tx.Exec(ctx, "SELECT 1 / $1::int", 0)
			return nil
		}, koto.ClassRetryable},
	}
	for _, m := range modes {
		for _, c := range cases {
			key := newUUIDKey()
			claimed, err := inTx(t, s, idempotency.Claim{Key: key, Defer: m.deferred}, func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "SELECT $1::int", 1); err != nil { // sends a deferred claim
					return err
				}
				return c.fn(ctx, tx)
			})
			if err == nil || !claimed || koto.ClassOf(err) != c.want {
				t.Errorf("%s/%s: Transact = %v, %v (%v); want claimed and a %v error", m.name, c.name, claimed, err, koto.ClassOf(err), c.want)
			}
			if isProcessed(t, s, key) {
				t.Errorf("%s/%s: the claim was kept", m.name, c.name)
			}
		}
	}
}
