package telemetry_test

import (
	"context"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestPublisherSpans: each message published gets a producer span, a child
// of the span in its context or else of the trace context in its metadata,
// and that span's trace context in its metadata.
func TestPublisherSpans(t *testing.T) {
	s := newSDK(t)
	raw := kototest.NewPublisher(t, broker.Config{Brokers: kototest.Brokers(t)})
	pub := s.tel.Publisher(raw)
	if again := s.tel.Publisher(pub); again != pub {
		t.Error("decorating a decorated publisher decorated it again")
	}
	topic := kototest.Topic(t, "events")

	ctx, caller := s.tracer.Start(context.Background(), "caller")
	fromCtx := message.NewMessage(watermill.NewUUID(), []byte("{}"))
	fromCtx.SetContext(ctx)
	// A message read back from an outbox table: a trace context in its
	// metadata, none in its context.
	_, earlier := s.tracer.Start(context.Background(), "earlier")
	fromMetadata := message.NewMessage(watermill.NewUUID(), []byte("{}"))
	propagation.TraceContext{}.Inject(trace.ContextWithSpan(context.Background(), earlier), propagation.MapCarrier(fromMetadata.Metadata))
	if err := pub.Publish(topic, fromCtx, fromMetadata); err != nil {
		t.Fatalf("publish: %v", err)
	}
	caller.End()
	earlier.End()

	sends := named(s.spans.Ended(), "send "+topic)
	if len(sends) != 2 {
		t.Fatalf("want 2 send spans:\n%s", describe(s.spans.Ended()))
	}
	for i, c := range []struct {
		msg    *message.Message
		parent trace.Span
	}{{fromCtx, caller}, {fromMetadata, earlier}} {
		send := sends[i]
		if send.SpanKind() != trace.SpanKindProducer || send.Parent().SpanID() != c.parent.SpanContext().SpanID() {
			t.Errorf("message %d: send span of kind %v with parent %v, want a producer span with parent %v",
				i, send.SpanKind(), send.Parent().SpanID(), c.parent.SpanContext().SpanID())
		}
		got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(c.msg.Metadata)))
		if got.SpanID() != send.SpanContext().SpanID() || got.TraceID() != send.SpanContext().TraceID() {
			t.Errorf("message %d: traceparent %q is not the send span's", i, c.msg.Metadata.Get("traceparent"))
		}
		if got := attr(send, semconv.MessagingMessageIDKey); got != c.msg.UUID {
			t.Errorf("message %d: messaging.message.id %q, want %q", i, got, c.msg.UUID)
		}
	}
	if got := s.count(t, "messaging.client.sent.messages", semconv.MessagingDestinationName(topic)); got != 2 {
		t.Errorf("sent messages: %d, want 2", got)
	}

	// A publish that fails marks its span and its metrics with the error.
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), nil)); err == nil {
		t.Fatal("publish on a closed publisher succeeded")
	}
	failed := named(s.spans.Ended(), "send "+topic)[2]
	if failed.Status().Code != codes.Error {
		t.Errorf("failed publish: span status %v, want Error", failed.Status())
	}
	if got := s.count(t, "messaging.client.sent.messages", semconv.MessagingDestinationName(topic)); got != 3 {
		t.Errorf("sent messages after a failure: %d, want 3", got)
	}
	if got := s.count(t, "messaging.client.operation.duration", semconv.MessagingDestinationName(topic)); got != 2 {
		t.Errorf("send durations (one per Publish call): %d, want 2", got)
	}
	ok := s.count(t, "messaging.client.operation.duration", semconv.MessagingDestinationName(topic), semconv.ErrorTypeKey.String(attr(failed, semconv.ErrorTypeKey)))
	if attr(failed, semconv.ErrorTypeKey) == "" || ok != 1 {
		t.Errorf("failed publish: error.type %q on its span, %d durations with it, want one", attr(failed, semconv.ErrorTypeKey), ok)
	}
}
