package telemetry

import (
	"cmp"
	"context"
	"strconv"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/koto-dev/watermill-koto/correlation"
	reports "github.com/koto-dev/watermill-koto/internal/reporting"
)

// Middleware is the consumer side, a router middleware: the consumer span
// of each delivery (see Traces in the package doc), in the message context,
// and the delivery's metrics. The messages the handler returns get the
// span's trace context, unless they carry one. The outcome comes from
// middleware.Logging inside it (see Wiring in the package doc); without it
// the delivery is recorded without an outcome.
func (t *Telemetry) Middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		ctx := msg.Context()
		d := &delivery{t: t, topic: message.SubscribeTopicFromCtx(ctx), group: t.group(msg), outer: reports.From(ctx)}
		if t.m.process.Enabled(ctx) {
			d.start = time.Now()
		}
		ctx = t.prop.Extract(ctx, carrier(msg))
		ctx, d.span = t.tracer.Start(ctx, "process "+d.topic, t.consumerSpan...)
		if d.span.IsRecording() {
			d.span.SetAttributes(d.spanAttrs(ctx, msg)...)
		}
		d.Context = ctx
		msg.SetContext(d)
		produced, err := h(msg)
		t.adopt(ctx, produced)
		d.end(ctx, err)
		return produced, err
	}
}

// adopt gives the messages a handler returned the trace context of ctx,
// the consumer span's, when they have none: in their metadata for the
// consumers downstream, and in their context for a publisher decorated by
// [Telemetry.Publisher], whose producer span becomes its child.
func (t *Telemetry) adopt(ctx context.Context, msgs []*message.Message) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	for _, m := range msgs {
		if trace.SpanContextFromContext(m.Context()).IsValid() {
			continue
		}
		m.SetContext(trace.ContextWithSpanContext(m.Context(), sc))
		if !t.carries(m) {
			t.prop.Inject(ctx, carrier(m))
		}
	}
}

// delivery is the telemetry of one delivery of a message. It is the
// message's context while the chain runs: the context with the consumer
// span, which also finds the delivery (one allocation for both).
type delivery struct {
	context.Context
	t     *Telemetry
	span  trace.Span
	start time.Time // zero when the duration is not recorded
	topic string
	group string
	outer reports.Reporter // the one of the context outside, which hears the reports too

	// Set by Report.
	outcome   string
	attempts  int
	class     string // of a dead letter
	errorType string // of a dead letter's cause
}

type deliveryKey struct{}

// Value returns the delivery as the context's delivery.Reporter, and the
// value of the context with the consumer span for any other key.
func (d *delivery) Value(key any) any {
	if key == (deliveryKey{}) || reports.IsKey(key) {
		return d
	}
	return d.Context.Value(key)
}

func (d *delivery) spanAttrs(ctx context.Context, msg *message.Message) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs,
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName(opProcess),
		semconv.MessagingDestinationName(d.topic),
		semconv.MessagingMessageID(msg.UUID),
	)
	if d.group != "" {
		attrs = append(attrs, semconv.MessagingConsumerGroupName(d.group))
	}
	if id := cmp.Or(correlation.FromContext(ctx), correlation.FromMessage(msg)); id != "" {
		attrs = append(attrs, semconv.MessagingMessageConversationID(id))
	}
	if p, ok := koto.PositionFromContext(ctx); ok {
		attrs = append(attrs,
			semconv.MessagingDestinationPartitionID(strconv.Itoa(int(p.Partition))),
			semconv.MessagingKafkaOffset(int(p.Offset)))
		if len(p.Key) > 0 {
			attrs = append(attrs, semconv.MessagingKafkaMessageKey(string(p.Key)))
		}
	}
	return attrs
}

// end records the delivery's metrics and ends its span; err is what the
// chain returned.
func (d *delivery) end(ctx context.Context, err error) {
	m := &d.t.m
	errorType := ""
	if err != nil {
		errorType = semconv.ErrorType(err).Value.AsString()
	}
	if m.consumed.Enabled(ctx) || m.process.Enabled(ctx) {
		set := d.t.sets.of(setKey{topic: d.topic, group: d.group, outcome: d.outcome, errorType: errorType}, d.processAttrs)
		m.consumed.AddSet(ctx, 1, set)
		if !d.start.IsZero() {
			m.process.RecordSet(ctx, time.Since(d.start).Seconds(), set)
		}
	}
	if d.outcome == outcomeDeadLettered && m.deadLetters.Enabled(ctx) {
		attrs := append(d.metricAttrs(""), attrErrorClass.String(d.class), semconv.ErrorTypeKey.String(d.errorType))
		m.deadLetters.Add(ctx, 1, metric.WithAttributes(attrs...))
	}
	if !d.span.IsRecording() {
		d.span.End()
		return
	}
	attrs := make([]attribute.KeyValue, 0, 3)
	if d.outcome != "" {
		attrs = append(attrs, attrOutcome.String(d.outcome))
	}
	if d.attempts > 1 {
		attrs = append(attrs, attrAttempts.Int(d.attempts))
	}
	if err != nil {
		d.span.RecordError(err)
		d.span.SetStatus(codes.Error, err.Error())
		attrs = append(attrs, semconv.ErrorTypeKey.String(errorType))
	}
	d.span.SetAttributes(attrs...)
	d.span.End()
}

// processAttrs returns the attributes of the delivery metrics of k.
func (d *delivery) processAttrs(k setKey) attribute.Set {
	attrs := d.metricAttrs(opProcess)
	if k.outcome != "" {
		attrs = append(attrs, attrOutcome.String(k.outcome))
	}
	if k.errorType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(k.errorType))
	}
	return attribute.NewSet(attrs...)
}

// metricAttrs returns the attributes every consumer metric has, with
// messaging.operation.name when op is not empty.
func (d *delivery) metricAttrs(op string) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs, semconv.MessagingSystemKafka, semconv.MessagingDestinationName(d.topic))
	if op != "" {
		attrs = append(attrs, semconv.MessagingOperationName(op))
	}
	if d.group != "" {
		attrs = append(attrs, semconv.MessagingConsumerGroupName(d.group))
	}
	return attrs
}

// Names of the messaging operations, the messaging.operation.name of spans
// and metrics.
const (
	opProcess = "process"
	opSend    = "send"
	opRequest = "request"
)

// Attributes of the span event of a retry.
const (
	attrAttempt    = attribute.Key("koto.attempt")     // the attempt that failed, from 1
	attrRetryDelay = attribute.Key("koto.retry.delay") // seconds until the next one
)

// outcomeDeadLettered is middleware.OutcomeDeadLettered, which this
// package cannot import.
const outcomeDeadLettered = "dead-lettered"

// Report records the outcome of the delivery, reported by middleware.Logging.
func (d *delivery) Report(r reports.Outcome) {
	d.outer.Report(r)
	d.outcome, d.attempts, d.class, d.errorType = r.Outcome, r.Attempts, r.ErrorClass, r.ErrorType
	if r.Outcome == outcomeDeadLettered && d.span.IsRecording() && r.Err != nil {
		d.span.RecordError(r.Err)
		d.span.SetStatus(codes.Error, r.Err.Error())
		d.span.SetAttributes(attrErrorClass.String(r.ErrorClass), semconv.ErrorTypeKey.String(r.ErrorType))
	}
}

// Retried counts a retry of the delivery and adds an event to its span.
func (d *delivery) Retried(r reports.Retry) {
	d.outer.Retried(r)
	ctx := d.Context
	if m := &d.t.m; m.retries.Enabled(ctx) {
		m.retries.Add(ctx, 1, metric.WithAttributes(append(d.metricAttrs(""), attrErrorClass.String(r.ErrorClass))...))
	}
	if d.span.IsRecording() {
		d.span.AddEvent("retry", trace.WithAttributes(
			attrAttempt.Int(r.Attempt),
			attrErrorClass.String(r.ErrorClass),
			semconv.ErrorType(r.Err),
			semconv.ExceptionMessage(r.Err.Error()),
			attrRetryDelay.Float64(r.Delay.Seconds()),
		))
	}
}
