package benchmarks

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// runCallers runs b.N calls of op spread over callers goroutines and fails
// b with the first error. It reports ops/s beside ns/op.
func runCallers(b *testing.B, callers int, op func(ctx context.Context) error) {
	ctx := context.Background()
	var (
		next     atomic.Int64
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	b.ResetTimer()
	for range max(callers, 1) {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := op(ctx); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "ops/s")
	}
}
