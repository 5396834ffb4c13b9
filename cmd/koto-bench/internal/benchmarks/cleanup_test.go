package benchmarks_test

import (
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// BenchmarkCleanup measures one Cleanup pass over b.N expired marks (each
// op is one row deleted) while 4 goroutines make marks, and reports the p99
// latency of those marks and of the same marks without a pass (go run
// ./cmd/koto-bench cleanup prints their ratio on a 1 000 000-row table).
// Try -benchtime=200000x.
func BenchmarkCleanup(b *testing.B) {
	pool := pgtest.Pool(b)
	c, err := benchmarks.NewCleanup(b.Context(), pool, pgtest.Schema(b, pool))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	r, err := benchmarks.MeasureCleanup(b.Context(), c, b.N, 4, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	if r.Deleted != int64(b.N) {
		b.Fatalf("deleted %d of %d expired marks", r.Deleted, b.N)
	}
	b.ReportMetric(float64(r.Elapsed.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(r.Rate(), "rows/s")
	b.ReportMetric(float64(r.During.P99)/float64(time.Millisecond), "mark-p99-ms")
	b.ReportMetric(float64(r.Quiet.P99)/float64(time.Millisecond), "quiet-mark-p99-ms")
}
