package benchmarks_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// newE2E sets up the end-to-end consumer benchmark on a broker of the test
// and the test database, with a pool of E2EPartitions+4 connections.
func newE2E(tb testing.TB) *benchmarks.E2E {
	tb.Helper()
	cfg := pgtest.Config(tb)
	cfg.MaxConns = benchmarks.E2EPartitions + 4
	pool := pgtest.PoolWith(tb, cfg)
	e, err := benchmarks.NewE2E(context.Background(), kototest.Brokers(tb), pool, pgtest.Name("koto_e2e"))
	if err != nil {
		tb.Fatalf("NewE2E: %v", err)
	}
	tb.Cleanup(func() {
		if err := e.Close(); err != nil {
			tb.Errorf("E2E close: %v", err)
		}
	})
	return e
}

// BenchmarkConsumerEndToEnd measures the idempotent consumer end to
// end (embedded Kafka, 4 partitions → router → middleware.Defaults →
// handler), one sub-benchmark per variant; each op is one message, and
// msg/s is reported. Only consumption is timed, from the first message
// entering the chain. Ratios between variants mean something only within
// one run; cmd/koto-bench e2e interleaves the variants and prints them.
// Try -benchtime=5000x.
func BenchmarkConsumerEndToEnd(b *testing.B) {
	e := newE2E(b)
	for _, v := range append(benchmarks.E2EVariants(), benchmarks.E2ETelemetryVariants()...) {
		b.Run(v.Name, func(b *testing.B) {
			b.StopTimer()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			run, err := e.Start(ctx, v, b.N)
			if err != nil {
				b.Fatal(err)
			}
			defer run.Close()
			<-run.First()
			b.StartTimer()
			d, err := run.Wait(ctx)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/d.Seconds(), "msg/s")
		})
	}
}

// BenchmarkConsumerBatch measures the batch handlers end to end
// (embedded Kafka, 4 partitions → router → middleware.BatchDefaults →
// batch handler writing its rows with one statement) and their baselines,
// one sub-benchmark per variant; each op is one message, and msg/s is
// reported. Ratios between variants mean something only within one run;
// cmd/koto-bench batch interleaves the variants and prints them. Try
// -benchtime=20000x.
func BenchmarkConsumerBatch(b *testing.B) {
	e := newE2E(b)
	for _, v := range benchmarks.E2EBatchVariants() {
		b.Run(v.Name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			b.StopTimer()
			d, err := e.Run(ctx, v, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/d.Seconds(), "msg/s")
		})
	}
}

// TestConsumerEndToEndVariants runs every variant of the benchmark on a few
// messages, through the router and directly, and checks that the handlers
// that write wrote a row for each.
func TestConsumerEndToEndVariants(t *testing.T) {
	e := newE2E(t)
	const n = 40
	writers := 0
	for _, run := range []benchmarks.E2ERunner{e.Consume, e.Direct} {
		variants := append(benchmarks.E2EVariants(), benchmarks.E2ETelemetryVariants()...)
		results, err := benchmarks.CompareE2E(t.Context(), run, variants, n, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if r.Messages != n || r.Rate() <= 0 || (r.Variant.Baseline != "") != (r.Ratio > 0) {
				t.Errorf("%s: %+v", r.Variant.Name, r)
			}
			if r.Variant.Handler != benchmarks.NoopHandler {
				writers++
			}
		}
	}
	if rows, err := e.Rows(t.Context()); err != nil || rows != int64(writers*n) {
		t.Errorf("%d rows written (%v), want %d", rows, err, writers*n)
	}
}

// TestConsumerBatchVariants runs every variant of the batch benchmark on a
// few messages, with raw pgx's batches, then the batch consumer's latency
// run, and checks that each that writes wrote a row per message, that
// every ratio was computed, and that the latency run's consumer wrote
// every message produced.
func TestConsumerBatchVariants(t *testing.T) {
	e := newE2E(t)
	const n = 1200 // more than two batches, less than the subscriber's in-flight messages
	variants := benchmarks.E2EBatchVariants()
	results, err := benchmarks.CompareE2E(t.Context(), e.Run, variants, n, 1)
	if err != nil {
		t.Fatal(err)
	}
	writers := 0
	for _, r := range results {
		v := r.Variant
		if r.Messages != n || r.Rate() <= 0 || (v.Baseline != "") != (r.Ratio > 0) || (v.Also != "") != (r.AlsoRatio > 0) {
			t.Errorf("%s: %+v", v.Name, r)
		}
		if v.Handler != benchmarks.NoopHandler {
			writers++
		}
	}
	batch := variants[slices.IndexFunc(variants, func(v benchmarks.E2EVariant) bool { return v.Name == benchmarks.E2EBatchWriteTx })]
	const produced = 300
	l, err := e.Latency(t.Context(), batch, 2000, produced)
	if err != nil {
		t.Fatal(err)
	}
	if l.Messages != produced || l.P50 <= 0 || l.P99 < l.P50 || l.CPU.Self <= 0 {
		t.Errorf("latency of %s: %+v", batch.Name, l)
	}
	want := int64(writers*n + 1 + produced) // the latency run's first message is not produced at the rate
	if rows, err := e.Rows(t.Context()); err != nil || rows != want {
		t.Errorf("%d rows written (%v), want %d", rows, err, want)
	}
}
