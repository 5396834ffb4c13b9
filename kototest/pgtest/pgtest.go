// Package pgtest gives tests a PostgreSQL pool and a schema of their own,
// and stages the faults of the database's connection: [ProxiedPool]
// connects through a [Proxy] that a test cuts, restores or slows down.
//
// The database URL comes from DATABASE_URL, by default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. When PostgreSQL
// cannot be reached, a test fails with instructions if CI=true, and is
// skipped with the same instructions otherwise. Whatever a helper opens
// is closed, and every schema it creates dropped, when the test ends.
//
// It is the PostgreSQL half of package kototest, apart so that the tests
// of the packages kototest builds on can use it too.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// defaultURL is the database URL used when DATABASE_URL is not set.
const defaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns DATABASE_URL, or the default of the package documentation
// when it is unset.
func URL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return defaultURL
}

// Config returns a parsed pool configuration for URL, for tests that need to
// change it (for example to dial through a proxy) before connecting.
func Config(t testing.TB) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(URL())
	if err != nil {
		t.Fatalf("pgtest: DATABASE_URL %q does not parse: %v", URL(), err)
	}
	return cfg
}

// Pool connects to the test database and closes the pool when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return PoolWith(t, Config(t))
}

// PoolWith connects with cfg and closes the pool when the test ends. It
// fails or skips the test, as the package documentation says, when the
// database cannot be reached.
func PoolWith(t testing.TB, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		unreachable(t, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// LazyPool returns a pool on URL that connects only when it is used, for
// tests of configurations that are refused before any database work. It is
// closed when the test ends.
func LazyPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), Config(t))
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// ProxiedPool connects to the test database through a TCP proxy that the
// test can cut and restore, to stage an outage. The pool's connection
// timeout is 2 s, so that calls fail fast while the proxy is cut. The pool
// and the proxy are closed when the test ends.
func ProxiedPool(t testing.TB) (*pgxpool.Pool, *Proxy) {
	t.Helper()
	cfg := Config(t)
	proxy, err := StartProxy(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	if err != nil {
		t.Fatalf("pgtest: start the proxy: %v", err)
	}
	t.Cleanup(func() { // after the pool's, registered below
		if err := proxy.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("pgtest: close the proxy: %v", err)
		}
	})
	host, port, err := net.SplitHostPort(proxy.Addr())
	if err != nil {
		t.Fatalf("pgtest: proxy address %q: %v", proxy.Addr(), err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Fatalf("pgtest: proxy port %q: %v", port, err)
	}
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(n)
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	return PoolWith(t, cfg), proxy
}

func unreachable(t testing.TB, err error) {
	t.Helper()
	const how = "start PostgreSQL 13+ (on Debian: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start; " +
		"or docker compose up -d postgres) or point DATABASE_URL at one"
	if os.Getenv("CI") == "true" {
		t.Fatalf("pgtest: PostgreSQL at %s is unreachable: %v; %s", URL(), err, how)
	}
	t.Skipf("pgtest: PostgreSQL at %s is unreachable: %v; %s (with CI=true this fails)", URL(), err, how)
}

// Schema creates a schema with a random name and drops it, with everything
// in it, when the test ends. The name is returned unquoted; it needs no
// quoting.
func Schema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	name := Name("koto_test")
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", name, err)
	}
	t.Cleanup(func() { DropSchema(t, pool, name) })
	return name
}

// DropSchema drops a schema and everything in it, if it exists.
func DropSchema(t testing.TB, pool *pgxpool.Pool, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("pgtest: drop schema %s: %v", name, err)
	}
}

// Name returns prefix followed by '_' and 12 random hex digits: a fresh,
// lower-case identifier for a schema or table.
func Name(prefix string) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + "_" + hex.EncodeToString(b[:])
}
