package benchmarks

import (
	"context"
	"flag"
	"testing"

	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestMain fails the run if any goroutine outlives the tests. Watermill's
// map repository, measured beside MemoryStore, starts a cleanup goroutine
// that nothing can stop; it alone is ignored.
func TestMain(m *testing.M) {
	kototest.VerifyTestMain(m, goleak.IgnoreTopFunction(
		"github.com/ThreeDotsLabs/watermill/message/router/middleware.(*mapExpiringKeyRepository).cleanOutLoop"))
}

// TestStoreCheckMarkRunsAllOperations runs the body on a MemoryStore and
// checks that the callers together did b.N check+marks, each with a new key.
func TestStoreCheckMarkRunsAllOperations(t *testing.T) {
	shortBenchtime(t)
	store := idempotency.NewMemoryStore(0)
	defer store.Close()
	var n int
	r := testing.Benchmark(func(b *testing.B) {
		StoreCheckMark(b, store, 4)
		n += b.N
	})
	if r.N == 0 || store.Len() != n {
		t.Fatalf("N = %d, %d marks for %d operations", r.N, store.Len(), n)
	}
	if r.Extra["ops/s"] <= 0 {
		t.Fatalf("no ops/s reported: %v", r.Extra)
	}
}

func TestInterleaveSumsEachSide(t *testing.T) {
	shortBenchtime(t)
	var aRuns, bRuns int
	a := func(b *testing.B) { aRuns++; runCallers(b, 1, func(ctx context.Context) error { return nil }) }
	b := func(b *testing.B) { bRuns++; runCallers(b, 2, func(ctx context.Context) error { return nil }) }
	ra, rb := interleave(a, b, 2)
	if ra.N == 0 || rb.N == 0 || aRuns == 0 || bRuns == 0 {
		t.Fatalf("interleave: a %d ops in %d runs, b %d ops in %d runs", ra.N, aRuns, rb.N, bRuns)
	}
	if (StoreResult{Raw: 100, Store: 80}).Ratio() != 0.8 || (StoreResult{}).Ratio() != 0 {
		t.Fatal("Ratio")
	}
}

// shortBenchtime makes testing.Benchmark run for 10ms instead of a second.
func shortBenchtime(t *testing.T) {
	t.Helper()
	old := flag.Lookup("test.benchtime").Value.String()
	if err := flag.Set("test.benchtime", "10ms"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set("test.benchtime", old) })
}
