package telemetry_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/telemetry"
)

// The names of this project's own instruments and attributes, as the
// package doc lists them for users' dashboards.
const (
	metricConsumerRetries     = "koto.consumer.retries"
	metricConsumerDeadLetters = "koto.consumer.dead_letters"
	metricStoreDuration       = "koto.idempotency.store.duration"
	metricRequestDuration     = "koto.request.duration"
	metricOutboxWaiting       = "koto.outbox.rows.waiting"
	metricOutboxLag           = "koto.outbox.forward.lag"
	metricScheduled           = "koto.outbox.scheduled"
	metricLateness            = "koto.outbox.schedule.lateness"

	attrOutcome        = attribute.Key("koto.outcome")
	attrErrorClass     = attribute.Key("koto.error_class")
	attrStoreOperation = attribute.Key("koto.idempotency.operation")
	attrRequestOutcome = attribute.Key("koto.request.outcome")
	attrOutboxTable    = attribute.Key("koto.outbox.table")
)

// sdk is a Telemetry on the OpenTelemetry SDK, with a span recorder and a
// manual metric reader to look at what it recorded.
type sdk struct {
	tel    *telemetry.Telemetry
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tracer trace.Tracer // for the tests' own root spans
}

func newSDK(t *testing.T) *sdk {
	t.Helper()
	s := &sdk{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	tel, err := telemetry.New(telemetry.Config{MeterProvider: mp, TracerProvider: tp, Propagator: propagation.TraceContext{}})
	if err != nil {
		t.Fatalf("telemetry.New: %v", err)
	}
	s.tel, s.tracer = tel, tp.Tracer("test")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("spans recorded:\n%s", describe(s.spans.Ended()))
		}
	})
	return s
}

// metrics collects the metrics recorded so far.
func (s *sdk) metrics(t *testing.T) []metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	var out []metricdata.Metrics
	for _, sm := range rm.ScopeMetrics {
		out = append(out, sm.Metrics...)
	}
	return out
}

// count returns, of the metric name, the sum of the counter's data points,
// or the sum of the histogram's counts, whose attributes include all of
// match.
func (s *sdk) count(t *testing.T, name string, match ...attribute.KeyValue) int64 {
	t.Helper()
	var n int64
	for _, m := range s.metrics(t) {
		if m.Name != name {
			continue
		}
		switch data := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, dp := range data.DataPoints {
				if hasAll(dp.Attributes, match) {
					n += dp.Value
				}
			}
		case metricdata.Histogram[float64]:
			for _, dp := range data.DataPoints {
				if hasAll(dp.Attributes, match) {
					n += int64(dp.Count)
				}
			}
		default:
			t.Fatalf("%s: unexpected data %T", name, m.Data)
		}
	}
	return n
}

func hasAll(set attribute.Set, match []attribute.KeyValue) bool {
	for _, kv := range match {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// waitForSpans polls until the recorder has ended spans for which done
// holds, and returns them all.
func (s *sdk) waitForSpans(t *testing.T, done func([]sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
	t.Helper()
	var spans []sdktrace.ReadOnlySpan
	kototest.WaitFor(t, "the spans", func() bool {
		spans = s.spans.Ended()
		return done(spans)
	})
	return spans
}

// named returns the spans called name.
func named(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// attr returns the value of key on span, "" if it has none.
func attr(span sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range span.Attributes() {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// describe lists spans as a tree of names, for failure messages.
func describe(spans []sdktrace.ReadOnlySpan) string {
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	ids := map[trace.SpanID]bool{}
	for _, s := range spans {
		ids[s.SpanContext().SpanID()] = true
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if p := s.Parent().SpanID(); ids[p] {
			children[p] = append(children[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	var b strings.Builder
	var walk func(s sdktrace.ReadOnlySpan, depth int)
	walk = func(s sdktrace.ReadOnlySpan, depth int) {
		fmt.Fprintf(&b, "%s%s (trace %s, outcome %q)\n", strings.Repeat("  ", depth), s.Name(),
			s.SpanContext().TraceID(), attr(s, attrOutcome))
		kids := children[s.SpanContext().SpanID()]
		slices.SortFunc(kids, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}
