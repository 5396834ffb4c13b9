package telemetry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/koto-dev/watermill-koto/telemetry"
)

// outboxGauges collects the outbox gauges of table public.outbox, by
// name, and the error of the collection (the callback's).
func outboxGauges(s *sdk) (map[string]float64, error) {
	var rm metricdata.ResourceMetrics
	err := s.reader.Collect(context.Background(), &rm)
	table := []attribute.KeyValue{attrOutboxTable.String("public.outbox")}
	got := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, dp := range data.DataPoints {
					if hasAll(dp.Attributes, table) {
						got[m.Name] = float64(dp.Value)
					}
				}
			case metricdata.Gauge[float64]:
				for _, dp := range data.DataPoints {
					if hasAll(dp.Attributes, table) {
						got[m.Name] = dp.Value
					}
				}
			}
		}
	}
	return got, err
}

// TestObserveOutbox: the gauges report what the outbox's callback returns
// at each collection, per table, until the registration is undone; a
// failing callback reports nothing.
func TestObserveOutbox(t *testing.T) {
	s := newSDK(t)
	backlog := telemetry.OutboxBacklog{Waiting: 7, Lag: 1500 * time.Millisecond, Scheduled: 30}
	var failing error
	reg, err := s.tel.ObserveOutbox("public.outbox", func(ctx context.Context) (telemetry.OutboxBacklog, error) {
		return backlog, failing
	})
	if err != nil {
		t.Fatalf("ObserveOutbox: %v", err)
	}
	want := func(what string, waiting, lag, scheduled float64) {
		t.Helper()
		got, err := outboxGauges(s)
		if err != nil || len(got) != 3 || got[metricOutboxWaiting] != waiting || got[metricOutboxLag] != lag || got[metricScheduled] != scheduled {
			t.Errorf("%s: gauges %v (%v), want waiting %v, lag %v, scheduled %v", what, got, err, waiting, lag, scheduled)
		}
	}
	want("gauges", 7, 1.5, 30)
	backlog = telemetry.OutboxBacklog{}
	want("gauges of an empty outbox", 0, 0, 0)
	failing = errors.New("database down")
	if got, err := outboxGauges(s); len(got) != 0 || err == nil || !strings.Contains(err.Error(), "public.outbox: database down") {
		t.Errorf("a failing callback: %v, error %v; want none, and the error naming the table", got, err)
	}
	failing = nil
	if err := reg.Unregister(); err != nil {
		t.Fatalf("Unregister: %v", err)
	}
	if got, err := outboxGauges(s); len(got) != 0 || err != nil {
		t.Errorf("after Unregister: %v, %v", got, err)
	}
}

// TestScheduleFired: each lateness is one point of the histogram, in
// seconds, with the table.
func TestScheduleFired(t *testing.T) {
	s := newSDK(t)
	s.tel.ScheduleFired(context.Background(), "public.outbox", []time.Duration{2 * time.Millisecond, 40 * time.Millisecond, 3 * time.Second})
	s.tel.ScheduleFired(context.Background(), "public.outbox", nil)
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok || m.Name != metricLateness {
				continue
			}
			for _, dp := range h.DataPoints {
				found = true
				if dp.Count != 3 || dp.Sum < 3.041 || dp.Sum > 3.043 || !hasAll(dp.Attributes, []attribute.KeyValue{attrOutboxTable.String("public.outbox")}) {
					t.Errorf("lateness: %d points summing %v with %v; want 3 summing 3.042 s with the table", dp.Count, dp.Sum, dp.Attributes)
				}
			}
		}
	}
	if !found {
		t.Errorf("no %s recorded", metricLateness)
	}
}
