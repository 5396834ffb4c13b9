package benchmarks

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/koto-dev/watermill-koto/telemetry"
)

// SDKTelemetry is a Telemetry on the OpenTelemetry SDK as an application
// configures it, less the network: a tracer provider that samples every
// span and exports them in batches to an exporter that drops them, and a
// meter provider whose reader aggregates every measurement (nobody
// collects). The benchmarks of the telemetry package and the end-to-end
// variants with Telemetry use it. Close it when done.
func SDKTelemetry() (tel *telemetry.Telemetry, closeSDK func() error, err error) {
	s, err := newSDKTelemetry()
	if err != nil {
		return nil, nil, err
	}
	return s.tel, s.Close, nil
}

// sdkTelemetry is what SDKTelemetry returns.
type sdkTelemetry struct {
	tel *telemetry.Telemetry
	tp  *sdktrace.TracerProvider
	mp  *sdkmetric.MeterProvider
}

func newSDKTelemetry() (*sdkTelemetry, error) {
	s := &sdkTelemetry{
		tp: sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardSpans{})),
		mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
	}
	var err error
	s.tel, err = telemetry.New(telemetry.Config{MeterProvider: s.mp, TracerProvider: s.tp, Propagator: propagation.TraceContext{}})
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// Close shuts the providers down, which stops the span batcher.
func (s *sdkTelemetry) Close() error {
	ctx := context.Background()
	return errors.Join(s.tp.Shutdown(ctx), s.mp.Shutdown(ctx))
}

// discardSpans is a span exporter that drops what it gets.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }
