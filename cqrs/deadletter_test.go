package cqrs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/deadletter"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/topics"
)

// estateMapping is one side of a mixed estate: how a service reads or
// writes, and a record of another producer as it reads it.
type estateMapping struct {
	name      string
	marshaler func(t *testing.T, source string) kafka.MarshalerUnmarshaler
	// record returns the headers of an event with id, whose correlation
	// ID is corr, as its producer writes them, pairs of key and value.
	record func(id, corr string) []string
	// key is the idempotency key of the event with id: a CloudEvent's is
	// its source and id.
	key func(id string) string
}

var (
	cloudEventsSide = estateMapping{
		name:      "CloudEvents",
		marshaler: cloudEventsMarshaler,
		record: func(id, corr string) []string {
			return []string{"ce_specversion", "1.0", "ce_id", id, "ce_source", "/shop", "ce_type", "com.example.shop.parcel-shipped",
				"ce_time", "2026-03-04T05:06:07Z", "content-type", "application/json", "ce_correlationid", corr, "ce_tenant", "acme"}
		},
		key: func(id string) string { return strconv.Quote("/shop") + " " + id },
	}
	wolverineSide = estateMapping{
		name: "Wolverine",
		marshaler: func(t *testing.T, source string) kafka.MarshalerUnmarshaler {
			t.Helper()
			m, err := broker.NewWolverineMarshaler(broker.WolverineConfig{Source: source, Types: broker.TypeNames{
				Names: map[string]string{"parcel-shipped": "Shop.Contracts.ParcelShipped"},
			}})
			if err != nil {
				t.Fatal(err)
			}
			return m
		},
		record: func(id, corr string) []string {
			return []string{"id", id, "message-type", "Shop.Contracts.ParcelShipped", "correlation-id", corr,
				"content-type", "application/json", "source", "shop-api", "sent-at", "2026-03-04 05:06:07:123456 Z", "tenant-id", "acme"}
		},
		key: func(id string) string { return id },
	}
)

// TestDeadLetterKeepsTheRecordAcrossMappings: a consumer reads one
// mapping and sends its dead letters through the direct publisher of a
// DurableOutbox in another. A poison record is dead-lettered as it was
// consumed: its key, value and every header, in order, then the
// dead_letter_* headers. Fixed and replayed with the deadletter package's
// defaults, it is handled once, with its id (the processed-messages row),
// its type and its correlation ID, before the next record of its key, and
// is not dead-lettered again.
func TestDeadLetterKeepsTheRecordAcrossMappings(t *testing.T) {
	for _, tc := range []struct {
		consumer, outbox estateMapping
		ids              [2]string
	}{
		{cloudEventsSide, wolverineSide, [2]string{"ev-1", "ev-2"}},
		{wolverineSide, cloudEventsSide, [2]string{"5b1c3e1a-2f4d-4c6e-9a8b-7d6e5f4a3b2c", "7c2d4f2b-3a5e-4d7f-8b9c-0e1f2a3b4c5d"}},
	} {
		t.Run(tc.consumer.name+" consumer, "+tc.outbox.name+" outbox", func(t *testing.T) {
			testDeadLetterAcrossMappings(t, tc.consumer, tc.outbox, tc.ids)
		})
	}
}

func testDeadLetterAcrossMappings(t *testing.T, consumer, box estateMapping, ids [2]string) {
	brokers := kototest.Brokers(t)
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	shop, billing := kototest.ServiceName(t, "shop"), kototest.ServiceName(t, "billing")
	topic, group := topics.Event(shop, "parcel-shipped"), topics.ConsumerGroup(billing, "parcel-shipped")
	d, err := cqrs.NewDurableOutbox(kototest.Context(t), pool, cqrs.DurableOutboxConfig{
		Broker: broker.Config{Brokers: brokers, Marshaler: box.marshaler(t, billing)},
		Outbox: outbox.Config{Schema: schema}, Store: postgres.Config{Schema: schema, CleanupInterval: -1},
		Logger: kototest.Logger(slog.LevelError),
	})
	if err != nil {
		t.Fatalf("NewDurableOutbox: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	svc, err := d.Service(cqrs.ServiceConfig{
		Name: billing, AutoProvisionTopics: true, Logger: kototest.Logger(slog.LevelError),
		Broker:     broker.Config{Brokers: brokers, Marshaler: consumer.marshaler(t, "/"+billing)},
		DeadLetter: middleware.DeadLetterConfig{Backoff: koto.Backoff{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, svc)
	var broken atomic.Bool
	broken.Store(true)
	handled := make(chan handledEvent, 8)
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err = svc.Register(kototest.Context(t), r, cqrs.NewEventConsumer(func(ctx context.Context, ev *ParcelShipped) error {
		if broken.Load() {
			return koto.Poison(errors.New("parcel " + ev.ParcelID + " rejected"))
		}
		handled <- handledEvent{id: ev.ParcelID, correlation: correlation.FromContext(ctx)}
		return nil
	}, cqrs.From(shop)))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	kototest.RunRouter(t, r)

	dlq := topics.DeadLetter(group)
	original := consumer.record(ids[0], "corr-1")
	body, _ := json.Marshal(ParcelShipped{ParcelID: "p-1"})
	produceRecord(t, brokers, topic, "parcel-key", string(body), original...)
	kototest.WaitFor(t, "the dead letter", func() bool { return kototest.Records(t, brokers, dlq) == 1 })
	checkVerbatim(t, kototest.ReadAll(t, brokers, dlq)[0], "parcel-key", body, original)

	broken.Store(false)
	q, err := deadletter.NewQueue(deadletter.Config{Broker: broker.Config{Brokers: brokers}, ConsumerGroup: group})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if res, err := q.Replay(kototest.Context(t), deadletter.Filter{}, deadletter.ReplayOptions{}); err != nil || res.Sent != 1 {
		t.Fatalf("Replay: %+v, %v; want 1 sent", res, err)
	}
	next, _ := json.Marshal(ParcelShipped{ParcelID: "p-2"})
	produceRecord(t, brokers, topic, "parcel-key", string(next), consumer.record(ids[1], "corr-2")...)
	for _, want := range []handledEvent{{id: "p-1", correlation: "corr-1"}, {id: "p-2", correlation: "corr-2"}} {
		if got := kototest.Receive(t, handled, "event "+want.id); got.id != want.id || got.correlation != want.correlation {
			t.Fatalf("handled %s with correlation %q, want %s with %q, each once and in order", got.id, got.correlation, want.id, want.correlation)
		}
	}
	kototest.WaitFor(t, "the marks of both events", func() bool { return len(processedIDs(t, pool, schema)) == 2 })
	want := []string{idempotency.KeyUUID(idempotency.ScopedKey(group, consumer.key(ids[0]))).String(), idempotency.KeyUUID(idempotency.ScopedKey(group, consumer.key(ids[1]))).String()}
	slices.Sort(want)
	if got := processedIDs(t, pool, schema); !slices.Equal(got, want) {
		t.Errorf("processed_messages = %v, want the marks of the events' own ids %v", got, want)
	}
	if n := kototest.Records(t, brokers, dlq); n != 1 {
		t.Errorf("%d dead letters, want the first one alone: the replay was read as it was consumed", n)
	}
}

// checkVerbatim fails t unless rec is the record of key, value and
// headers (pairs of key and value) as it was, followed by the dead-letter
// middleware's headers and nothing else.
func checkVerbatim(t *testing.T, rec *kgo.Record, key string, value []byte, headers []string) {
	t.Helper()
	if string(rec.Key) != key || !bytes.Equal(rec.Value, value) {
		t.Errorf("dead letter key %q value %q, want the record's %q %q", rec.Key, rec.Value, key, value)
	}
	n := len(headers) / 2
	if len(rec.Headers) < n {
		t.Fatalf("dead letter has %d headers, want the record's %d and more", len(rec.Headers), n)
	}
	for i := range n {
		if h := rec.Headers[i]; h.Key != headers[2*i] || string(h.Value) != headers[2*i+1] {
			t.Errorf("dead letter header %d is %s=%q, want the record's %s=%q", i, h.Key, h.Value, headers[2*i], headers[2*i+1])
		}
	}
	var extra []string
	for _, h := range rec.Headers[n:] {
		extra = append(extra, h.Key)
		if !strings.HasPrefix(h.Key, "dead_letter_") {
			t.Errorf("dead letter header %s=%q is neither the record's nor the middleware's", h.Key, h.Value)
		}
	}
	for _, k := range []string{"dead_letter_reason", "dead_letter_original_topic", "dead_letter_original_partition",
		"dead_letter_original_offset", "dead_letter_consumer_group", "dead_letter_failed_at"} {
		if !slices.Contains(extra, k) {
			t.Errorf("dead letter lacks %s; it has %v after the record's headers", k, extra)
		}
	}
}
