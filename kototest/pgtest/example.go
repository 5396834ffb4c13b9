package pgtest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ExampleDatabase connects to [URL] and creates a schema with a fresh name
// (a plain identifier, which needs no quoting), for the runnable examples,
// which have no testing.T: it panics, saying what the example needs, when
// PostgreSQL cannot be reached. The example drops the schema and closes
// the pool.
func ExampleDatabase(ctx context.Context) (*pgxpool.Pool, string) {
	pool, err := pgxpool.New(ctx, URL())
	if err != nil {
		panic(err)
	}
	schema := Name("koto_example")
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		pool.Close()
		panic(fmt.Errorf("this example needs PostgreSQL at %s (set DATABASE_URL): %w", URL(), err))
	}
	return pool, schema
}
