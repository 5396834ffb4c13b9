package telemetry

import (
	"context"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// StartBatch starts the span of a batch that the router handler named
// handler runs: a consumer span linked to the span of each of msgs (the
// trace context in its context, or else in its metadata, which it then
// also puts in its context, so that what is published for the message
// continues its trace), and returns ctx with it and the function that
// ends it, with the batch's error. It records the batch's size by why it
// stopped filling (reason).
func (t *Telemetry) StartBatch(ctx context.Context, handler, reason string, msgs []*message.Message) (context.Context, func(err error)) {
	t.m.batchSize.Record(ctx, int64(len(msgs)), metric.WithAttributes(semconv.MessagingConsumerGroupName(handler), attrBatchFlush.String(reason)))
	opts := t.consumerSpan
	if links := t.batchLinks(msgs); len(links) > 0 {
		opts = append(opts[:len(opts):len(opts)], trace.WithLinks(links...))
	}
	ctx, span := t.tracer.Start(ctx, "process batch "+handler, opts...)
	if span.IsRecording() {
		span.SetAttributes(
			semconv.MessagingBatchMessageCount(len(msgs)),
			semconv.MessagingConsumerGroupName(handler),
			attrBatchFlush.String(reason),
		)
	}
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// batchLinks links to the span of each message; none when nothing is
// traced.
func (t *Telemetry) batchLinks(msgs []*message.Message) []trace.Link {
	var links []trace.Link
	for _, m := range msgs {
		sc := trace.SpanContextFromContext(m.Context())
		if !sc.IsValid() && t.carries(m) {
			m.SetContext(t.extract(m.Context(), m))
			sc = trace.SpanContextFromContext(m.Context())
		}
		if sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{semconv.MessagingMessageID(m.UUID)}})
		}
	}
	return links
}

// BatchSettled records what became of one message of a batch, as
// [Telemetry.Middleware] records a delivery: messaging.client.consumed.messages
// with its koto.outcome ("ok", "duplicate", "dead-lettered", "nacked",
// "probe"), and koto.consumer.dead_letters for a dead letter.
func (t *Telemetry) BatchSettled(ctx context.Context, msg *message.Message, outcome string) {
	d := t.batchDelivery(msg)
	m := &t.m
	if m.consumed.Enabled(ctx) {
		m.consumed.AddSet(ctx, 1, t.sets.of(setKey{topic: d.topic, group: d.group, outcome: outcome}, d.processAttrs))
	}
	if outcome == outcomeDeadLettered && m.deadLetters.Enabled(ctx) {
		m.deadLetters.Add(ctx, 1, metric.WithAttributes(d.metricAttrs("")...))
	}
}

// BatchRetried counts a failed attempt of one message of a batch that is
// tried again, as koto.consumer.retries, with its error class.
func (t *Telemetry) BatchRetried(ctx context.Context, msg *message.Message, class string) {
	if m := &t.m; m.retries.Enabled(ctx) {
		m.retries.Add(ctx, 1, metric.WithAttributes(append(t.batchDelivery(msg).metricAttrs(""), attrErrorClass.String(class))...))
	}
}

// batchDelivery is the delivery of a batch's message, for its attributes.
func (t *Telemetry) batchDelivery(msg *message.Message) *delivery {
	ctx := msg.Context()
	topic := message.SubscribeTopicFromCtx(ctx)
	if p, ok := koto.PositionFromContext(ctx); ok {
		topic = p.Topic
	}
	return &delivery{t: t, topic: topic, group: t.group(msg)}
}
