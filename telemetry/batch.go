package telemetry

import (
	"context"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// StartBatch starts the span of a batch that the router handler named
// handler runs: a consumer span linked to the span of each of msgs (each
// message's own consumer span, from [Telemetry.Middleware]), and returns
// ctx with it and the function that ends it, with the batch's error, and
// records the batch's size by why it was flushed (reason).
func (t *Telemetry) StartBatch(ctx context.Context, handler, reason string, msgs []*message.Message) (context.Context, func(err error)) {
	t.m.batchSize.Record(ctx, int64(len(msgs)), metric.WithAttributes(semconv.MessagingConsumerGroupName(handler), attrBatchFlush.String(reason)))
	opts := t.consumerSpan
	if links := batchLinks(msgs); len(links) > 0 {
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

// batchLinks links to the span in each message's context; none when
// nothing is traced.
func batchLinks(msgs []*message.Message) []trace.Link {
	var links []trace.Link
	for _, m := range msgs {
		if sc := trace.SpanContextFromContext(m.Context()); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{semconv.MessagingMessageID(m.UUID)}})
		}
	}
	return links
}
