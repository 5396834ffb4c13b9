package cqrs_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"

	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/telemetry"
	"github.com/koto-dev/watermill-koto/topics"
)

// probeMapping is a record mapping of the probe test, and how an event is
// written in it.
type probeMapping struct {
	name      string
	marshaler func(t *testing.T, source string) kafka.MarshalerUnmarshaler
	event     func(id, parcel string) (value string, headers []string)
}

// TestWolverineProbesAreAckedUnhandled sends, on a one-partition topic, an
// event, the ping envelope of a Wolverine sender that recovered, the
// record of Wolverine's resources check and another event to a consumer
// with the Wolverine mapping, and with the CloudEvents mapping (Wolverine
// in CloudEvents mode keeps its envelope headers on a ping): the handler
// sees the two events, nothing is dead-lettered, and each probe is counted
// with outcome probe and logged at debug.
func TestWolverineProbesAreAckedUnhandled(t *testing.T) {
	for _, m := range []probeMapping{
		{"Wolverine", func(t *testing.T, source string) kafka.MarshalerUnmarshaler {
			return newMarshaler(t)(broker.NewWolverineMarshaler(broker.WolverineConfig{Source: source,
				Types: broker.TypeNames{Names: map[string]string{"parcel-shipped": "Shop.Contracts.ParcelShipped"}}}))
		}, func(id, parcel string) (string, []string) {
			body, _ := json.Marshal(ParcelShipped{ParcelID: parcel})
			return string(body), []string{"id", id, "message-type", "Shop.Contracts.ParcelShipped", "content-type", "application/json"}
		}},
		{"CloudEvents", cloudEventsMarshaler, func(id, parcel string) (string, []string) {
			body, _ := json.Marshal(ParcelShipped{ParcelID: parcel})
			return string(body), []string{"ce_specversion", "1.0", "ce_id", id, "ce_source", "/shop",
				"ce_type", "com.example.shop.parcel-shipped", "content-type", "application/json"}
		}},
	} {
		t.Run(m.name, func(t *testing.T) { testProbes(t, m) })
	}
}

func testProbes(t *testing.T, m probeMapping) {
	brokers := kototest.Brokers(t)
	shop, shipping := kototest.ServiceName(t, "shop"), kototest.ServiceName(t, "shipping")
	topic, dlq := topics.Event(shop, "parcel-shipped"), topics.DeadLetter(topics.ConsumerGroup(shipping, "parcel-shipped"))
	kototest.Provision(t, broker.Config{Brokers: brokers, Provision: broker.ProvisionConfig{Partitions: 1}}, topic, dlq)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	tel, err := telemetry.New(telemetry.Config{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	var logs kototest.Buffer
	svc, err := cqrs.NewService(cqrs.ServiceConfig{
		Name: shipping, Telemetry: tel, Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Broker: broker.Config{Brokers: brokers, Marshaler: m.marshaler(t, shipping)},
	})
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, svc)
	handled := handleParcels(t, svc, shop)

	value, headers := m.event("0f8fad5b-d9cb-469f-a165-70867728950e", "p-1")
	produceRecord(t, brokers, topic, "p-1", value, headers...)
	const pingID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	produceRecord(t, brokers, topic, pingID, "\x01\x02\x03\x04", "id", pingID, "message-type", "wolverine-ping",
		"content-type", "wolverine/ping", "source", "shop-api", "sent-at", "2026-03-04 05:06:07:123456 Z")
	produceRecord(t, brokers, topic, "ping", "ping")
	value, headers = m.event("1f8fad5b-d9cb-469f-a165-70867728950e", "p-2")
	produceRecord(t, brokers, topic, "p-2", value, headers...)

	if got := receiveUntil(t, handled, "p-2"); !slices.Equal(got, []string{"p-1", "p-2"}) {
		t.Errorf("handled %q, want the two events alone", got)
	}
	// One partition, one message at a time: the probes were done with
	// before the second event was handed out.
	if n := kototest.Records(t, brokers, dlq); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}
	if n := consumedWithOutcome(t, reader, "probe"); n != 2 {
		t.Errorf("%d deliveries counted with outcome probe, want 2", n)
	}
	if kinds := probeLines(t, logs.Bytes()); !slices.Equal(kinds, []string{"wolverine-ping", "wolverine-resources-check"}) {
		t.Errorf("debug lines of probes: %q, want one per probe, in order", kinds)
	}
}

// newMarshaler returns a function that fails t on the error of a mapping's
// constructor.
func newMarshaler(t *testing.T) func(kafka.MarshalerUnmarshaler, error) kafka.MarshalerUnmarshaler {
	return func(m kafka.MarshalerUnmarshaler, err error) kafka.MarshalerUnmarshaler {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

// consumedWithOutcome sums messaging.client.consumed.messages with
// koto.outcome outcome.
func consumedWithOutcome(t *testing.T, reader *sdkmetric.ManualReader, outcome string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if m.Name != "messaging.client.consumed.messages" || !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				if v, _ := dp.Attributes.Value(attribute.Key("koto.outcome")); v.AsString() == outcome {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// probeLines returns the probe of each debug line of outcome probe in a
// JSON log.
func probeLines(t *testing.T, log []byte) []string {
	t.Helper()
	var kinds []string
	sc := bufio.NewScanner(bytes.NewReader(log))
	for sc.Scan() {
		var line struct{ Level, Outcome, Probe string }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %s: %v", sc.Bytes(), err)
		}
		if line.Outcome == "probe" && line.Level == "DEBUG" {
			kinds = append(kinds, line.Probe)
		}
	}
	return kinds
}
