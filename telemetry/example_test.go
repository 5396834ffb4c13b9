package telemetry_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/telemetry"
)

// A service gives its Telemetry to the middleware chain and to the cqrs
// publishers and services; here the consumer chain handles one message
// and the metrics show it. In production the providers export, for
// instance with OTLP, or serve Prometheus (see examples/shop).
func Example() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tp := sdktrace.NewTracerProvider()
	defer mp.Shutdown(ctx)
	defer tp.Shutdown(ctx)
	tel, err := telemetry.New(telemetry.Config{MeterProvider: mp, TracerProvider: tp, Propagator: propagation.TraceContext{}})
	if err != nil {
		panic(err)
	}

	kafka, err := embedded.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer kafka.Close()
	pub, err := broker.NewPublisher(broker.Config{Brokers: kafka.Addrs()})
	if err != nil {
		panic(err)
	}
	defer pub.Close()

	// The same tel goes in the Telemetry field of cqrs.ServiceConfig,
	// EventPublisherConfig and CommandDispatcherConfig.
	chain, err := middleware.Defaults(middleware.Config{Publisher: pub, Telemetry: tel, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer chain.Close(ctx)
	// router.AddMiddleware(chain.Middlewares()...) in a service; here the
	// chain is called directly.
	h := message.HandlerFunc(func(*message.Message) ([]*message.Message, error) { return nil, nil })
	mws := chain.Middlewares()
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	if _, err := h(message.NewMessage(watermill.NewUUID(), []byte(`{}`))); err != nil {
		panic(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
			outcome, _ := sum.DataPoints[0].Attributes.Value(attribute.Key("koto.outcome"))
			fmt.Println(m.Name, outcome.AsString(), sum.DataPoints[0].Value)
		}
	}
	// Output:
	// messaging.client.consumed.messages ok 1
}

// A publisher of one's own, decorated: each message it publishes gets a
// producer span, child of the span in the message's context, and that
// span's trace context in its metadata, which becomes Kafka headers.
func ExampleTelemetry_Publisher() {
	ctx := context.Background()
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(ctx)
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp, Propagator: propagation.TraceContext{}})
	if err != nil {
		panic(err)
	}
	kafka, err := embedded.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer kafka.Close()
	raw, err := broker.NewPublisher(broker.Config{Brokers: kafka.Addrs()})
	if err != nil {
		panic(err)
	}
	pub := tel.Publisher(raw)
	defer pub.Close()

	ctx, span := tp.Tracer("example").Start(ctx, "checkout")
	defer span.End()
	msg := message.NewMessage(watermill.NewUUID(), []byte(`{"orderId":"o-1"}`))
	msg.SetContext(ctx)
	if err := pub.Publish("orders.order-placed", msg); err != nil {
		panic(err)
	}
	carried := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(msg.Metadata)))
	fmt.Println("in the checkout's trace:", carried.TraceID() == span.SpanContext().TraceID())
	// Output:
	// in the checkout's trace: true
}

// An outbox reports its backlog at each collection of the metrics.
func ExampleTelemetry_ObserveOutbox() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	tel, err := telemetry.New(telemetry.Config{MeterProvider: mp})
	if err != nil {
		panic(err)
	}
	reg, err := tel.ObserveOutbox("koto.outbox", func(ctx context.Context) (telemetry.OutboxBacklog, error) {
		// One query, such as: SELECT count(*), now() - min(created_at) FROM koto.outbox
		return telemetry.OutboxBacklog{Waiting: 12, Lag: 250 * time.Millisecond, Scheduled: 3}, nil
	})
	if err != nil {
		panic(err)
	}
	defer reg.Unregister()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch data := m.Data.(type) {
		case metricdata.Gauge[int64]:
			fmt.Println(m.Name, data.DataPoints[0].Value)
		case metricdata.Gauge[float64]:
			fmt.Println(m.Name, data.DataPoints[0].Value)
		}
	}
	// Output:
	// koto.outbox.rows.waiting 12
	// koto.outbox.forward.lag 0.25
	// koto.outbox.scheduled 3
}
