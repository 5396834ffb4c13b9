package benchmarks_test

import (
	"testing"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// BenchmarkForwarder measures the forwarder's throughput: b.N messages
// committed beforehand, then forwarded to Kafka; msg/s leaves out the
// start-up and the first batch (go run ./cmd/koto-bench outbox compares it
// with Watermill's forwarder).
func BenchmarkForwarder(b *testing.B) {
	pool := pgtest.Pool(b)
	ob, err := benchmarks.NewOutbox(kototest.Context(b), kototest.Brokers(b), pool, pgtest.Name("koto_bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer ob.Close()
	if _, err := ob.Fill(kototest.Context(b), b.N); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	f, err := ob.ForwardKoto(kototest.Context(b), b.N)
	if err != nil {
		b.Fatal(err)
	}
	if f.Time > 0 {
		b.ReportMetric(float64(f.Messages)/f.Time.Seconds(), "msg/s")
	}
}
