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

// RequestOutcome is how a request/reply ended, the value of
// [AttrRequestOutcome].
type RequestOutcome string

const (
	// RequestOK: the reply came with a result.
	RequestOK RequestOutcome = "ok"
	// RequestHandlerError: the reply came with the handler's error.
	RequestHandlerError RequestOutcome = "handler-error"
	// RequestTimeout: no reply came in time.
	RequestTimeout RequestOutcome = "timeout"
	// RequestFailed: the request could not be sent, or the wait ended for
	// another reason (a cancelled context, a closed dispatcher).
	RequestFailed RequestOutcome = "error"
)

// RequestEnd ends what [Telemetry.StartRequest] started: the request's
// span and metrics. reply is the reply when one came, err the request's
// error when there is one.
type RequestEnd func(outcome RequestOutcome, reply *message.Message, err error)

// StartRequest starts the client span of a request/reply whose request goes
// to topic, a child of the span in ctx, and returns ctx with it, for the
// request to be sent with: its producer span, the handler's consumer span
// and the reply's producer span are descendants, so one request/reply is
// one trace. End it with the returned function, which also records
// [MetricRequestDuration] and, for a timeout, [MetricRequestTimeouts]. The
// cqrs command dispatcher calls it around every Request.
func (t *Telemetry) StartRequest(ctx context.Context, topic string) (context.Context, RequestEnd) {
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
	return ctx, func(outcome RequestOutcome, reply *message.Message, err error) {
		t.recordRequest(ctx, topic, outcome, time.Since(start))
		if !span.IsRecording() {
			span.End()
			return
		}
		span.SetAttributes(AttrRequestOutcome.String(string(outcome)))
		if reply != nil {
			span.AddLink(trace.LinkFromContext(t.Extract(context.Background(), reply)))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(semconv.ErrorType(err))
		}
		span.End()
	}
}

func (t *Telemetry) recordRequest(ctx context.Context, topic string, outcome RequestOutcome, took time.Duration) {
	m := &t.m
	if m.request.Enabled(ctx) {
		m.request.Record(ctx, took.Seconds(), metric.WithAttributes(semconv.MessagingSystemKafka,
			semconv.MessagingDestinationName(topic), AttrRequestOutcome.String(string(outcome))))
	}
	if outcome == RequestTimeout && m.timeouts.Enabled(ctx) {
		m.timeouts.Add(ctx, 1, metric.WithAttributes(semconv.MessagingSystemKafka, semconv.MessagingDestinationName(topic)))
	}
}
