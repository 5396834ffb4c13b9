package benchmarks_test

import (
	"log/slog"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/telemetry"
)

// BenchmarkConsumerChain measures what the telemetry middleware adds to a
// delivery, the chain Correlation → Telemetry → Logging around a handler
// that does nothing: without it, with no provider configured (the global
// providers nobody set), and with the SDK (every span sampled and exported
// in batches to nowhere, every metric aggregated: benchmarks.SDKTelemetry).
// Each message carries a producer's traceparent. The chain runs in the one
// goroutine of each parallel caller, as the router runs it per partition.
func BenchmarkConsumerChain(b *testing.B) {
	noProvider, err := telemetry.New(telemetry.Config{})
	if err != nil {
		b.Fatal(err)
	}
	withSDK, closeSDK, err := benchmarks.SDKTelemetry()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = closeSDK() })
	logging := middleware.Logging(slog.New(slog.DiscardHandler))
	for _, c := range []struct {
		name string
		mws  []message.HandlerMiddleware
	}{
		{"without telemetry", []message.HandlerMiddleware{middleware.Correlation, logging}},
		{"no provider", []message.HandlerMiddleware{middleware.Correlation, noProvider.Middleware, logging}},
		{"SDK", []message.HandlerMiddleware{middleware.Correlation, withSDK.Middleware, logging}},
	} {
		h := message.HandlerFunc(func(*message.Message) ([]*message.Message, error) { return nil, nil })
		for i := len(c.mws) - 1; i >= 0; i-- {
			h = c.mws[i](h)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					msg := message.NewMessage(correlation.NewID(), []byte(`{}`))
					msg.Metadata.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
					if _, err := h(msg); err != nil {
						b.Error(err)
					}
				}
			})
		})
	}
}
