package telemetry

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// OutboxStats is the state of one outbox table, as an outbox reports it
// to [Telemetry.ObserveOutbox].
type OutboxStats struct {
	// Waiting is the number of rows not yet forwarded.
	Waiting int64
	// OldestAge is the age of the oldest of them; zero when none waits.
	OldestAge time.Duration
}

// ObserveOutbox registers an outbox table: at every collection of the
// metrics, observe is called and its result recorded as
// [MetricOutboxWaiting] and [MetricOutboxLag], with [AttrOutboxTable]
// table. An error of observe leaves the gauges out of that collection and
// reaches the reader, which reports it. Unregister the returned registration when the
// outbox closes. observe runs on the collector's goroutine; keep it to one
// cheap query.
func (t *Telemetry) ObserveOutbox(table string, observe func(ctx context.Context) (OutboxStats, error)) (metric.Registration, error) {
	attrs := metric.WithAttributes(AttrOutboxTable.String(table))
	reg, err := t.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		s, err := observe(ctx)
		if err != nil {
			return fmt.Errorf("telemetry: observing outbox %s: %w", table, err)
		}
		o.ObserveInt64(t.m.outboxWaiting, s.Waiting, attrs)
		o.ObserveFloat64(t.m.outboxLag, s.OldestAge.Seconds(), attrs)
		return nil
	}, t.m.outboxWaiting, t.m.outboxLag)
	if err != nil {
		return nil, fmt.Errorf("telemetry: registering outbox %s: %w", table, err)
	}
	return reg, nil
}
