package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/koto-dev/watermill-koto/telemetry"
)

// observability is what -metrics and -trace turn on: the OpenTelemetry SDK
// behind the services' telemetry, a Prometheus endpoint, and the spans
// kept for printing one order's trace.
type observability struct {
	tel    *telemetry.Telemetry // nil without either flag: the global providers, which do nothing
	tracer trace.Tracer         // starts each order's checkout span
	spans  *spanBuffer          // nil unless tracing
	out    io.Writer            // where the trace goes
	json   bool                 // print the trace's spans in JSON too

	server *http.Server
	served chan error
	stop   []func(context.Context) error
}

func newObservability(opts options) (_ *observability, err error) {
	o := &observability{tracer: otel.Tracer("shop"), out: opts.trace, json: opts.traceJSON}
	if opts.metrics == nil && opts.trace == nil {
		return o, nil
	}
	defer func() {
		if err != nil {
			o.Close()
		}
	}()
	res := resource.NewSchemaless(semconv.ServiceName("shop"))
	cfg := telemetry.Config{}
	if opts.metrics != nil {
		if cfg.MeterProvider, err = o.servePrometheus(opts.metrics, res, opts.stdout()); err != nil {
			return nil, err
		}
	}
	if opts.trace != nil {
		o.spans = &spanBuffer{}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(o.spans), sdktrace.WithResource(res))
		o.stop = append(o.stop, tp.Shutdown)
		cfg.TracerProvider, cfg.Propagator = tp, propagation.TraceContext{}
		o.tracer = tp.Tracer("shop")
	}
	if o.tel, err = telemetry.New(cfg); err != nil {
		return nil, err
	}
	return o, nil
}

// servePrometheus serves the metrics of a new meter provider on ln at
// /metrics, in Prometheus's format.
func (o *observability) servePrometheus(ln net.Listener, res *resource.Resource, out io.Writer) (*sdkmetric.MeterProvider, error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithResource(res))
	o.stop = append(o.stop, mp.Shutdown)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	o.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	o.served = make(chan error, 1)
	go func() { o.served <- o.server.Serve(ln) }()
	fmt.Fprintf(out, "metrics on http://%s/metrics\n", ln.Addr())
	return mp, nil
}

// printTrace prints the spans of trace id as a tree (see traceTree), and
// with json also in the stdout exporter's JSON. Call it once the services
// stopped, so that every span of the trace has ended.
func (o *observability) printTrace(ctx context.Context, id trace.TraceID) error {
	if o.spans == nil || !id.IsValid() {
		return nil
	}
	spans := o.spans.trace(id)
	fmt.Fprintf(o.out, "\ntrace %s of the first order, %d spans", id, len(spans))
	if cid := correlationOf(spans); cid != "" {
		fmt.Fprintf(o.out, ", correlation ID %s", cid)
	}
	fmt.Fprint(o.out, ":\n\n")
	printTree(o.out, spans, checkoutService)
	if !o.json {
		return nil
	}
	fmt.Fprintf(o.out, "\nits %d spans in full:\n", len(spans))
	exporter, err := stdouttrace.New(stdouttrace.WithWriter(o.out), stdouttrace.WithPrettyPrint())
	if err != nil {
		return err
	}
	return errors.Join(exporter.ExportSpans(ctx, spans), exporter.Shutdown(ctx))
}

// Close stops the metrics endpoint and the SDK.
func (o *observability) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if o.server != nil {
		_ = o.server.Shutdown(ctx)
		<-o.served
	}
	for _, stop := range o.stop {
		_ = stop(ctx)
	}
}

// spanBuffer is a span exporter that keeps the spans in memory.
type spanBuffer struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

// ExportSpans keeps spans.
func (b *spanBuffer) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spans = append(b.spans, spans...)
	return nil
}

// Shutdown does nothing.
func (b *spanBuffer) Shutdown(context.Context) error { return nil }

// trace returns the spans of trace id, by start time.
func (b *spanBuffer) trace(id trace.TraceID) []sdktrace.ReadOnlySpan {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []sdktrace.ReadOnlySpan
	for _, s := range b.spans {
		if s.SpanContext().TraceID() == id {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(x, y sdktrace.ReadOnlySpan) int {
		return cmp.Or(x.StartTime().Compare(y.StartTime()), cmp.Compare(x.Name(), y.Name()))
	})
	return out
}
