package telemetry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
)

// TestStartBatch: a batch span linked to the span of each of its
// messages, with its size and flush reason, ended with the batch's error,
// and the size recorded by flush reason.
func TestStartBatch(t *testing.T) {
	s := newSDK(t)
	var msgs []*message.Message
	var want []trace.SpanContext
	for range 3 {
		ctx, span := s.tracer.Start(context.Background(), "process")
		span.End()
		m := message.NewMessage("id", nil)
		m.SetContext(ctx)
		msgs = append(msgs, m)
		want = append(want, span.SpanContext())
	}
	_, end := s.tel.StartBatch(context.Background(), "ledger.order-placed-consumer", "count", msgs)
	end(errors.New("one failed"))

	batches := named(s.spans.Ended(), "process batch ledger.order-placed-consumer")
	if len(batches) != 1 {
		t.Fatalf("%d batch spans, want 1:\n%s", len(batches), describe(s.spans.Ended()))
	}
	b := batches[0]
	if b.SpanKind() != trace.SpanKindConsumer || b.Status().Code != codes.Error {
		t.Errorf("batch span kind %v status %v, want consumer and an error", b.SpanKind(), b.Status())
	}
	if got := attr(b, "messaging.batch.message_count"); got != "3" {
		t.Errorf("messaging.batch.message_count %q, want 3", got)
	}
	if got := attr(b, "koto.batch.flush"); got != "count" {
		t.Errorf("koto.batch.flush %q, want count", got)
	}
	if len(b.Links()) != len(want) {
		t.Fatalf("%d links, want %d", len(b.Links()), len(want))
	}
	for i, l := range b.Links() {
		if l.SpanContext.SpanID() != want[i].SpanID() {
			t.Errorf("link %d to span %s, want %s", i, l.SpanContext.SpanID(), want[i].SpanID())
		}
	}
	var recorded int64
	for _, m := range s.metrics(t) {
		if m.Name != "koto.consumer.batch.size" {
			continue
		}
		for _, dp := range m.Data.(metricdata.Histogram[int64]).DataPoints {
			if hasAll(dp.Attributes, []attribute.KeyValue{attribute.String("koto.batch.flush", "count")}) {
				recorded += dp.Sum
			}
		}
	}
	if recorded != 3 {
		t.Errorf("koto.consumer.batch.size recorded %d messages by flush count, want 3", recorded)
	}
}
