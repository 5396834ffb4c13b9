package telemetry

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/koto-dev/watermill-koto/correlation"
)

// Request outcomes, the value of koto.request.outcome.
const (
	requestTimeout = "timeout"
)

// StartRequest starts the client span of a request/reply whose request goes
// to topic, a child of the span in ctx, and returns ctx with it, for the
// request to be sent with: its producer span, the handler's consumer span
// and the reply's producer span are descendants, so one request/reply is
// one trace. End it with the returned function, which also records
// koto.request.duration and, for a timeout, koto.request.timeouts: its
// outcome is "ok" (the reply came with a result), "handler-error" (with
// the handler's error), "timeout" (no reply in time) or "error" (not sent,
// or the wait ended otherwise); reply is the reply when one came, err the
// request's error. The cqrs command dispatcher calls it around every
// Request.
func (t *Telemetry) StartRequest(ctx context.Context, topic string) (context.Context, func(outcome string, reply *message.Message, err error)) {
	start := time.Now()
	ctx, span := t.tracer.Start(ctx, opRequest+" "+topic, t.clientSpan...)
	if span.IsRecording() {
		attrs := []attribute.KeyValue{semconv.MessagingSystemKafka, semconv.MessagingOperationName(opRequest),
			semconv.MessagingDestinationName(topic)}
		if id := correlation.FromContext(ctx); id != "" {
			attrs = append(attrs, semconv.MessagingMessageConversationID(id))
		}
		span.SetAttributes(attrs...)
	}
	return ctx, func(outcome string, reply *message.Message, err error) {
		t.recordRequest(ctx, topic, outcome, time.Since(start))
		if !span.IsRecording() {
			span.End()
			return
		}
		span.SetAttributes(attrRequestOutcome.String(outcome))
		if reply != nil {
			span.AddLink(trace.LinkFromContext(t.extract(context.Background(), reply)))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(semconv.ErrorType(err))
		}
		span.End()
	}
}

func (t *Telemetry) recordRequest(ctx context.Context, topic string, outcome string, took time.Duration) {
	m := &t.m
	if m.request.Enabled(ctx) {
		m.request.Record(ctx, took.Seconds(), metric.WithAttributes(semconv.MessagingSystemKafka,
			semconv.MessagingDestinationName(topic), attrRequestOutcome.String(outcome)))
	}
	if outcome == requestTimeout && m.timeouts.Enabled(ctx) {
		m.timeouts.Add(ctx, 1, metric.WithAttributes(semconv.MessagingSystemKafka, semconv.MessagingDestinationName(topic)))
	}
}
