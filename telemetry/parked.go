package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// ParkedBacklog is what a parking table holds for one consumer group, as
// the callback of [Telemetry.ObserveParked] reads it.
type ParkedBacklog struct {
	Group string
	// Messages is the messages parked; Keys the record keys they wait
	// on.
	Messages, Keys int64
}

// ObserveParked registers a parking table: at every collection of the
// metrics, observe is called and each group's figures recorded as
// koto.parked.messages and koto.parked.keys, with koto.parked.table table
// and messaging.consumer.group.name. An error of observe leaves the
// gauges out of that collection and reaches the reader. Unregister the
// returned registration when the table's user closes. observe runs on the
// collector's goroutine; keep it to one cheap query.
func (t *Telemetry) ObserveParked(table string, observe func(ctx context.Context) ([]ParkedBacklog, error)) (metric.Registration, error) {
	reg, err := t.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		groups, err := observe(ctx)
		if err != nil {
			return fmt.Errorf("telemetry: observing parking table %s: %w", table, err)
		}
		for _, g := range groups {
			attrs := metric.WithAttributes(attrParkedTable.String(table), semconv.MessagingConsumerGroupName(g.Group))
			o.ObserveInt64(t.m.parked, g.Messages, attrs)
			o.ObserveInt64(t.m.parkedKeys, g.Keys, attrs)
		}
		return nil
	}, t.m.parked, t.m.parkedKeys)
	if err != nil {
		return nil, fmt.Errorf("telemetry: registering parking table %s: %w", table, err)
	}
	return reg, nil
}
