package benchmarks_test

import (
	"fmt"
	"testing"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// BenchmarkCheckMark measures IsProcessed + MarkProcessed of new keys
// through the Store and, beside it, the same two statements issued with raw
// pgx on the same pool, at 1, 4 and 16 concurrent callers. Compare the
// ops/s of raw and store at each level (go run ./cmd/koto-bench store
// prints the ratios).
func BenchmarkCheckMark(b *testing.B) {
	cfg := pgtest.Config(b)
	cfg.MaxConns = 16
	pool := pgtest.PoolWith(b, cfg)
	schema := pgtest.Schema(b, pool)
	store, err := postgres.NewStore(pool, postgres.Config{Schema: schema, CleanupInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	if err := store.EnsureSchema(b.Context()); err != nil {
		b.Fatal(err)
	}
	for _, callers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("callers=%d/raw", callers), func(b *testing.B) {
			benchmarks.RawPgxCheckMark(b, pool, benchmarks.StoreSQL(store), callers)
		})
		b.Run(fmt.Sprintf("callers=%d/store", callers), func(b *testing.B) {
			benchmarks.StoreCheckMark(b, store, callers)
		})
	}
}
