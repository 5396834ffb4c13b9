package benchmarks

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
)

// StoreResult is one row of CompareStore: throughput of raw pgx and of the
// PostgreSQL store at one number of concurrent callers.
type StoreResult struct {
	Callers int
	Raw     float64 // ops/s
	Store   float64 // ops/s
}

// Ratio returns Store/Raw, or 0 when raw pgx did nothing.
func (r StoreResult) Ratio() float64 {
	if r.Raw == 0 {
		return 0
	}
	return r.Store / r.Raw
}

// CompareStore runs RawPgxCheckMark and StoreCheckMark on pool and store
// with testing.Benchmark, rounds times at each number of callers,
// alternating which goes first so that neither gets the warmer machine, and
// sums each side's operations and time over the rounds. It first warms up
// both, with as many callers as the most it measures, so that every pool
// connection is open and has prepared the statements.
func CompareStore(ctx context.Context, pool *pgxpool.Pool, store *postgres.Store, callers []int, rounds int) ([]StoreResult, error) {
	most := 1
	for _, c := range callers {
		most = max(most, c)
	}
	if err := store.EnsureSchema(ctx); err != nil {
		return nil, err
	}
	sql := StoreSQL(store)
	if err := warmUp(ctx, most, rawOp(pool, sql), storeOp(store)); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	out := make([]StoreResult, 0, len(callers))
	for _, c := range callers {
		raw := func(b *testing.B) { RawPgxCheckMark(b, pool, sql, c) }
		st := func(b *testing.B) { StoreCheckMark(b, store, c) }
		r, s := interleave(raw, st, rounds)
		if r.N == 0 || s.N == 0 {
			return out, fmt.Errorf("benchmark at %d callers failed (raw N=%d, store N=%d)", c, r.N, s.N)
		}
		out = append(out, StoreResult{Callers: c, Raw: opsPerSec(r), Store: opsPerSec(s)})
	}
	return out, nil
}

// interleave benchmarks a and b rounds times each, alternating which goes
// first, and returns their summed results.
func interleave(a, b func(*testing.B), rounds int) (ra, rb testing.BenchmarkResult) {
	for round := range max(rounds, 1) {
		first, second := a, b
		if round%2 == 1 {
			first, second = b, a
		}
		r1, r2 := testing.Benchmark(first), testing.Benchmark(second)
		if round%2 == 1 {
			r1, r2 = r2, r1
		}
		ra, rb = add(ra, r1), add(rb, r2)
	}
	return ra, rb
}

// warmUp runs each op 20 times from callers goroutines and returns the
// first error.
func warmUp(ctx context.Context, callers int, ops ...func(context.Context) error) error {
	var (
		once     sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	for _, op := range ops {
		for range callers {
			wg.Go(func() {
				for range 20 {
					if err := op(ctx); err != nil {
						once.Do(func() { firstErr = err })
						return
					}
				}
			})
		}
		wg.Wait()
	}
	return firstErr
}

// add sums two results' operations and time.
func add(a, b testing.BenchmarkResult) testing.BenchmarkResult {
	a.N += b.N
	a.T += b.T
	return a
}

func opsPerSec(r testing.BenchmarkResult) float64 {
	if r.T <= 0 {
		return 0
	}
	return float64(r.N) / r.T.Seconds()
}
