package telemetry

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// OutboxBacklog is what an outbox table holds at one moment, as the
// callback of [Telemetry.ObserveOutbox] reads it.
type OutboxBacklog struct {
	// Waiting is the rows not yet forwarded.
	Waiting int64
	// Lag is the age of the oldest of them, zero when none waits.
	Lag time.Duration
	// Scheduled is the messages scheduled and not yet due.
	Scheduled int64
}

// ObserveOutbox registers an outbox table: at every collection of the
// metrics, observe is called and its result recorded as
// koto.outbox.rows.waiting, koto.outbox.forward.lag and
// koto.outbox.scheduled, with koto.outbox.table table. An error of observe
// leaves the gauges out of that collection and reaches the reader, which
// reports it. Unregister the returned registration when the outbox
// closes. observe runs on the collector's goroutine; keep it to one cheap
// query.
func (t *Telemetry) ObserveOutbox(table string, observe func(ctx context.Context) (OutboxBacklog, error)) (metric.Registration, error) {
	attrs := metric.WithAttributes(attrOutboxTable.String(table))
	reg, err := t.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		b, err := observe(ctx)
		if err != nil {
			return fmt.Errorf("telemetry: observing outbox %s: %w", table, err)
		}
		o.ObserveInt64(t.m.outboxWaiting, b.Waiting, attrs)
		o.ObserveFloat64(t.m.outboxLag, b.Lag.Seconds(), attrs)
		o.ObserveInt64(t.m.scheduled, b.Scheduled, attrs)
		return nil
	}, t.m.outboxWaiting, t.m.outboxLag, t.m.scheduled)
	if err != nil {
		return nil, fmt.Errorf("telemetry: registering outbox %s: %w", table, err)
	}
	return reg, nil
}

// ScheduleFired records how late each scheduled message of table was when
// the forwarder moved it into the outbox, its fire time minus its due
// time, as koto.outbox.schedule.lateness.
func (t *Telemetry) ScheduleFired(ctx context.Context, table string, lateness []time.Duration) {
	if len(lateness) == 0 || !t.m.lateness.Enabled(ctx) {
		return
	}
	attrs := metric.WithAttributes(attrOutboxTable.String(table))
	for _, d := range lateness {
		t.m.lateness.Record(ctx, d.Seconds(), attrs)
	}
}
