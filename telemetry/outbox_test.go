package telemetry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestObserveOutbox: the gauges report what the outbox's callback returns
// at each collection, per table, until the registration is undone; a
// failing callback reports nothing.
func TestObserveOutbox(t *testing.T) {
	s := newSDK(t)
	waiting, oldest := int64(7), 1500*time.Millisecond
	var failing error
	reg, err := s.tel.ObserveOutbox("public.outbox", func(ctx context.Context) (int64, time.Duration, error) {
		return waiting, oldest, failing
	})
	if err != nil {
		t.Fatalf("ObserveOutbox: %v", err)
	}
	// gauges collects the gauges of the table, and the error of the
	// collection (the callback's).
	gauges := func() (waiting int64, lag float64, n int, err error) {
		var rm metricdata.ResourceMetrics
		err = s.reader.Collect(context.Background(), &rm)
		var all []metricdata.Metrics
		for _, sm := range rm.ScopeMetrics {
			all = append(all, sm.Metrics...)
		}
		for _, m := range all {
			switch data := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, dp := range data.DataPoints {
					if m.Name == metricOutboxWaiting && hasAll(dp.Attributes, []attribute.KeyValue{attrOutboxTable.String("public.outbox")}) {
						waiting, n = dp.Value, n+1
					}
				}
			case metricdata.Gauge[float64]:
				for _, dp := range data.DataPoints {
					if m.Name == metricOutboxLag && hasAll(dp.Attributes, []attribute.KeyValue{attrOutboxTable.String("public.outbox")}) {
						lag, n = dp.Value, n+1
					}
				}
			}
		}
		return waiting, lag, n, err
	}
	if w, l, n, err := gauges(); err != nil || n != 2 || w != 7 || l != 1.5 {
		t.Errorf("gauges: waiting %d, lag %v (%d points, %v), want 7 and 1.5", w, l, n, err)
	}
	waiting, oldest = 0, 0
	if w, l, n, err := gauges(); err != nil || n != 2 || w != 0 || l != 0 {
		t.Errorf("gauges of an empty outbox: waiting %d, lag %v (%d points, %v), want 0 and 0", w, l, n, err)
	}
	failing = errors.New("database down")
	if _, _, n, err := gauges(); n != 0 || err == nil || !strings.Contains(err.Error(), "public.outbox: database down") {
		t.Errorf("a failing callback: %d points, error %v; want none, and the error naming the table", n, err)
	}
	failing = nil
	if err := reg.Unregister(); err != nil {
		t.Fatalf("Unregister: %v", err)
	}
	if _, _, n, err := gauges(); n != 0 || err != nil {
		t.Errorf("after Unregister: %d points, %v", n, err)
	}
}
