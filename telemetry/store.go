package telemetry

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// StoreCall starts timing a call of the idempotency middleware to its store
// and returns what records it, with the call's error: koto.idempotency.store.duration,
// with error.type when the call failed.
func (d *delivery) StoreCall(op string) func(err error) {
	ctx := d.Context
	if !d.t.m.store.Enabled(ctx) {
		return ignoreError
	}
	start := time.Now()
	return func(err error) {
		attrs := make([]attribute.KeyValue, 0, 3)
		attrs = append(attrs, attrStoreOperation.String(op))
		if d.group != "" {
			attrs = append(attrs, semconv.MessagingConsumerGroupName(d.group))
		}
		if err != nil {
			attrs = append(attrs, semconv.ErrorType(err))
		}
		d.t.m.store.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attrs...))
	}
}

func ignoreError(error) {}
