package benchmarks_test

import (
	"context"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/kototest"
)

// BenchmarkRoundTrip compares a request/reply round trip (cqrs.Request
// through a Service's command consumer and back) with a raw produce→consume
// round trip of the same payload on the same broker, and with two raw hops
// back to back (ping-pong), the floor of a request, which is two hops.
// Request/reply over ping-pong has a guard against regression, ≤ 1.25×
// (hops-ratio), not a goal.
//
//	go test -run '^$' -bench RoundTrip ./cmd/koto-bench/internal/benchmarks
func BenchmarkRoundTrip(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rr, err := benchmarks.NewReqReply(ctx, kototest.Brokers(b), kototest.Topic(b, "bench"), 100)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rr.Close() })
	if _, err := benchmarks.MeasureReqReply(ctx, rr, 200, 0); err != nil {
		b.Fatal(err)
	}

	b.Run("raw", func(b *testing.B) {
		for b.Loop() {
			if err := rr.RawRoundTrip(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ping-pong", func(b *testing.B) {
		for b.Loop() {
			if err := rr.PingPong(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("request-reply", func(b *testing.B) {
		for b.Loop() {
			if err := rr.RequestReply(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Interleaved rounds, so that all see the same noise; reports the
	// median of each and the ratios of request/reply to raw and to
	// ping-pong.
	b.Run("interleaved", func(b *testing.B) {
		res, err := benchmarks.MeasureReqReply(ctx, rr, 0, b.N)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Raw.Median.Microseconds()), "raw-µs")
		b.ReportMetric(float64(res.PingPong.Median.Microseconds()), "pingpong-µs")
		b.ReportMetric(float64(res.Reply.Median.Microseconds()), "reqreply-µs")
		b.ReportMetric(res.ReplyRatio, "ratio")
		b.ReportMetric(res.ReplyHopsRatio, "hops-ratio")
	})
}
