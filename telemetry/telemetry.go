package telemetry

import (
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
	"go.opentelemetry.io/otel/trace"
)

// Config configures [New]. The zero value uses OpenTelemetry's global
// providers and propagator, which do nothing until the application sets
// them (otel.SetMeterProvider, otel.SetTracerProvider,
// otel.SetTextMapPropagator).
type Config struct {
	// MeterProvider creates the instruments. Default:
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider creates the spans. Default: otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Propagator writes the trace context into message metadata and reads
	// it back. Default: otel.GetTextMapPropagator(), which propagates
	// nothing until the application sets one; set
	// propagation.TraceContext{} for W3C traceparent and tracestate.
	Propagator propagation.TextMapPropagator
	// ConsumerGroup returns the consumer group of a handled message.
	// Default: the router handler's name (message.HandlerNameFromCtx),
	// which is the consumer group by this project's convention.
	ConsumerGroup func(msg *message.Message) string
}

func (c *Config) setDefaults() {
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.Propagator == nil {
		c.Propagator = otel.GetTextMapPropagator()
	}
	if c.ConsumerGroup == nil {
		c.ConsumerGroup = handlerName
	}
}

func handlerName(msg *message.Message) string {
	return message.HandlerNameFromCtx(msg.Context())
}

// Telemetry records the metrics and spans of one configuration. Make it
// with [New]; it is safe for concurrent use and owns no goroutines.
type Telemetry struct {
	tracer trace.Tracer
	meter  metric.Meter
	prop   propagation.TextMapPropagator
	group  func(*message.Message) string
	m      instruments
	sets   setCache // of the delivery metrics

	// Span start options, made once.
	consumerSpan, producerSpan, clientSpan []trace.SpanStartOption
}

// instruments are the instruments of a Telemetry.
type instruments struct {
	consumed      messagingconv.ClientConsumedMessages
	process       messagingconv.ProcessDuration
	sent          messagingconv.ClientSentMessages
	send          messagingconv.ClientOperationDuration
	retries       metric.Int64Counter
	deadLetters   metric.Int64Counter
	store         metric.Float64Histogram
	request       metric.Float64Histogram
	timeouts      metric.Int64Counter
	outboxWaiting metric.Int64ObservableGauge
	outboxLag     metric.Float64ObservableGauge
	scheduled     metric.Int64ObservableGauge
	lateness      metric.Float64Histogram
	parked        metric.Int64ObservableGauge
	parkedKeys    metric.Int64ObservableGauge
	batchSize     metric.Int64Histogram
}

// durationBuckets returns the bucket boundaries, in seconds, of the
// duration histograms: those the semantic conventions recommend for
// durations.
func durationBuckets() metric.HistogramOption {
	return metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
}

// New returns the Telemetry of cfg, with its instruments created. An error
// comes from the meter provider refusing an instrument.
func New(cfg Config) (*Telemetry, error) {
	cfg.setDefaults()
	t := &Telemetry{
		tracer: cfg.TracerProvider.Tracer(scopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		meter:  cfg.MeterProvider.Meter(scopeName, metric.WithSchemaURL(semconv.SchemaURL)),
		prop:   cfg.Propagator,
		group:  cfg.ConsumerGroup,

		consumerSpan: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)},
		producerSpan: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)},
		clientSpan:   []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)},
	}
	if err := t.m.create(t.meter); err != nil {
		return nil, fmt.Errorf("telemetry: creating the instruments: %w", err)
	}
	return t, nil
}

func (m *instruments) create(meter metric.Meter) error {
	buckets := durationBuckets()
	var errs [16]error
	m.consumed, errs[0] = messagingconv.NewClientConsumedMessages(meter)
	m.process, errs[1] = messagingconv.NewProcessDuration(meter, buckets)
	m.sent, errs[2] = messagingconv.NewClientSentMessages(meter)
	m.send, errs[3] = messagingconv.NewClientOperationDuration(meter, buckets)
	m.retries, errs[4] = meter.Int64Counter(metricConsumerRetries, metric.WithUnit("{retry}"),
		metric.WithDescription("Failed attempts of a handler that are retried after a backoff."))
	m.deadLetters, errs[5] = meter.Int64Counter(metricConsumerDeadLetters, metric.WithUnit("{message}"),
		metric.WithDescription("Messages sent to a dead-letter topic."))
	m.store, errs[6] = meter.Float64Histogram(metricStoreDuration, metric.WithUnit("s"), buckets,
		metric.WithDescription("Duration of the idempotency store's calls."))
	m.request, errs[7] = meter.Float64Histogram(metricRequestDuration, metric.WithUnit("s"), buckets,
		metric.WithDescription("Duration of a request/reply, from sending the request to its reply or the end of the wait."))
	m.timeouts, errs[8] = meter.Int64Counter(metricRequestTimeouts, metric.WithUnit("{request}"),
		metric.WithDescription("Requests that got no reply in time."))
	m.outboxWaiting, errs[9] = meter.Int64ObservableGauge(metricOutboxWaiting, metric.WithUnit("{row}"),
		metric.WithDescription("Outbox rows not yet forwarded."))
	m.outboxLag, errs[10] = meter.Float64ObservableGauge(metricOutboxLag, metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest outbox row not yet forwarded."))
	m.scheduled, errs[11] = meter.Int64ObservableGauge(metricScheduled, metric.WithUnit("{message}"),
		metric.WithDescription("Messages scheduled in an outbox and not yet due."))
	m.lateness, errs[12] = meter.Float64Histogram(metricLateness, metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
		metric.WithDescription("How late a scheduled message was moved into the outbox: its fire time minus its due time."))
	m.parked, errs[13] = meter.Int64ObservableGauge(metricParked, metric.WithUnit("{message}"),
		metric.WithDescription("Messages parked for a consumer group, to be tried again later."))
	m.parkedKeys, errs[14] = meter.Int64ObservableGauge(metricParkedKeys, metric.WithUnit("{key}"),
		metric.WithDescription("Record keys with messages parked for a consumer group, whose later messages wait behind them."))
	m.batchSize, errs[15] = meter.Int64Histogram(metricBatchSize, metric.WithUnit("{message}"),
		metric.WithExplicitBucketBoundaries(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000),
		metric.WithDescription("Messages of each batch a batch handler ran, by flush reason."))
	return errors.Join(errs[:]...)
}
