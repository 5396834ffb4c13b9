package telemetry

import (
	"cmp"
	"context"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/koto-dev/watermill-koto/correlation"
)

// Publisher returns pub decorated with the producer side: each message
// published gets a producer span (see Traces in the package doc) and that
// span's trace context in its metadata, and each call is counted and
// timed. A publisher that Publisher already decorated is returned as it
// is, so decorating twice records once. The message context is left as it
// is, so a publisher that finds a transaction there still does.
func (t *Telemetry) Publisher(pub message.Publisher) message.Publisher {
	if p, ok := pub.(*publisher); ok {
		return p
	}
	return &publisher{pub: pub, t: t}
}

// publisher is the decorator that [Telemetry.Publisher] returns.
type publisher struct {
	pub message.Publisher
	t   *Telemetry
}

// Publish publishes msgs to topic through the decorated publisher, each in
// a producer span.
func (p *publisher) Publish(topic string, msgs ...*message.Message) error {
	start := time.Now()
	var one [1]trace.Span
	spans := one[:0]
	if len(msgs) > 1 {
		spans = make([]trace.Span, 0, len(msgs))
	}
	for _, msg := range msgs {
		spans = append(spans, p.t.startSend(topic, msg))
	}
	err := p.pub.Publish(topic, msgs...)
	for _, span := range spans {
		if err != nil && span.IsRecording() {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(semconv.ErrorType(err))
		}
		span.End()
	}
	if len(msgs) > 0 {
		p.t.recordSend(msgs[0].Context(), topic, len(msgs), time.Since(start), err)
	}
	return err
}

// Close closes the decorated publisher.
func (p *publisher) Close() error { return p.pub.Close() }

// startSend starts the producer span of msg and writes its trace context
// into msg's metadata.
func (t *Telemetry) startSend(topic string, msg *message.Message) trace.Span {
	ctx := msg.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = t.prop.Extract(ctx, carrier(msg))
	}
	ctx, span := t.tracer.Start(ctx, "send "+topic, t.producerSpan...)
	if span.IsRecording() {
		span.SetAttributes(sendAttrs(ctx, topic, msg)...)
	}
	t.prop.Inject(ctx, carrier(msg))
	return span
}

func sendAttrs(ctx context.Context, topic string, msg *message.Message) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs,
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationTypeSend,
		semconv.MessagingOperationName(opSend),
		semconv.MessagingDestinationName(topic),
		semconv.MessagingMessageID(msg.UUID),
	)
	if id := cmp.Or(correlation.FromMessage(msg), correlation.FromContext(ctx)); id != "" {
		attrs = append(attrs, semconv.MessagingMessageConversationID(id))
	}
	if key := msg.Metadata.Get(koto.PartitionKeyMetadataKey); key != "" {
		attrs = append(attrs, semconv.MessagingKafkaMessageKey(key))
	}
	return attrs
}

// recordSend records the metrics of one call of Publish with n messages.
func (t *Telemetry) recordSend(ctx context.Context, topic string, n int, took time.Duration, err error) {
	m := &t.m
	if !m.sent.Enabled(ctx) && !m.send.Enabled(ctx) {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, semconv.MessagingSystemKafka, semconv.MessagingOperationName(opSend),
		semconv.MessagingDestinationName(topic))
	if err != nil {
		attrs = append(attrs, semconv.ErrorType(err))
	}
	m.sent.AddSet(ctx, int64(n), attribute.NewSet(attrs...))
	m.send.RecordSet(ctx, took.Seconds(), attribute.NewSet(append(attrs, semconv.MessagingOperationTypeSend)...))
}
