package telemetry

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// ObserveOutbox registers an outbox table: at every collection of the
// metrics, observe is called and its result, the rows not yet forwarded
// and the age of the oldest of them, recorded as
// koto.outbox.rows.waiting and koto.outbox.forward.lag, with koto.outbox.table
// table. An error of observe leaves the gauges out of that collection and
// reaches the reader, which reports it. Unregister the returned registration when the
// outbox closes. observe runs on the collector's goroutine; keep it to one
// cheap query.
func (t *Telemetry) ObserveOutbox(table string, observe func(ctx context.Context) (waiting int64, oldest time.Duration, err error)) (metric.Registration, error) {
	attrs := metric.WithAttributes(attrOutboxTable.String(table))
	reg, err := t.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		waiting, oldest, err := observe(ctx)
		if err != nil {
			return fmt.Errorf("telemetry: observing outbox %s: %w", table, err)
		}
		o.ObserveInt64(t.m.outboxWaiting, waiting, attrs)
		o.ObserveFloat64(t.m.outboxLag, oldest.Seconds(), attrs)
		return nil
	}, t.m.outboxWaiting, t.m.outboxLag)
	if err != nil {
		return nil, fmt.Errorf("telemetry: registering outbox %s: %w", table, err)
	}
	return reg, nil
}
