package middleware_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// postgresStore returns a PostgreSQL store in a new schema of the test's
// own.
func postgresStore(t *testing.T, pool *pgxpool.Pool) *postgres.Store {
	t.Helper()
	return postgresStoreIn(t, pool, pgtest.Schema(t, pool))
}

// postgresStoreIn returns a PostgreSQL store in schema, closed when the
// test ends. The background cleanup is off: the tests stay inside the
// window.
func postgresStoreIn(t *testing.T, pool *pgxpool.Pool, schema string) *postgres.Store {
	t.Helper()
	s, err := postgres.NewStore(pool, postgres.Config{Schema: schema, CleanupInterval: -1})
	if err != nil {
		t.Fatalf("postgres.NewStore: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
