package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// StoreOperation is a call of the idempotency middleware to its store, the
// value of [AttrStoreOperation].
type StoreOperation string

const (
	// StoreCheck is Store.IsProcessed.
	StoreCheck StoreOperation = "check"
	// StoreMark is Store.MarkProcessed, one attempt.
	StoreMark StoreOperation = "mark"
	// StoreClaim begins the transaction of the transactional mode and
	// claims the key in it (TransactionalStore.BeginClaim), when it runs
	// apart, as it does by default; with IdempotencyConfig.DeferClaim the
	// claim travels with the handler's first statement, or with the
	// commit, and is not recorded on its own.
	StoreClaim StoreOperation = "claim"
	// StoreCommit commits that transaction.
	StoreCommit StoreOperation = "commit"
)

// StoreCall starts timing a store call of the delivery whose context is
// ctx and returns the function that records it, with the call's error:
// [MetricStoreDuration], with error.type when the call failed. Without a
// delivery started by [Telemetry.Middleware] in ctx, or with the
// instrument disabled, the function does nothing. The idempotency
// middleware calls it around each store call.
func StoreCall(ctx context.Context, op StoreOperation) func(err error) {
	d := deliveryFrom(ctx)
	if d == nil || !d.t.m.store.Enabled(ctx) {
		return ignoreError
	}
	start := time.Now()
	return func(err error) {
		attrs := make([]attribute.KeyValue, 0, 3)
		attrs = append(attrs, AttrStoreOperation.String(string(op)))
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
