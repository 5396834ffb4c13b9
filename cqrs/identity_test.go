package cqrs_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"

	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

// TestCloudEventIdentityIsSourceAndID sends, on one key, the event 1001 of
// two sources, the first again (a redelivery) and a last event, to a
// CloudEvents consumer with the PostgreSQL store, in check-handle-mark and
// in transactional mode: both events 1001 are handled, the redelivery is
// not, and the store keeps a row for each event handled. With
// DeduplicateByID the second source's 1001 is a duplicate of the first's.
func TestCloudEventIdentityIsSourceAndID(t *testing.T) {
	bySourceAndID := []string{"/billing-a 1001", "/billing-b 1001", "/billing-a 1002"}
	for _, tc := range []struct {
		name          string
		transactional bool
		byID          bool
		want          []string
	}{
		{"check-handle-mark", false, false, bySourceAndID},
		{"transactional", true, false, bySourceAndID},
		{"DeduplicateByID", false, true, []string{"/billing-a 1001", "/billing-a 1002"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			billing, ledger := kototest.ServiceName(t, "billing"), kototest.ServiceName(t, "ledger")
			topic := topics.Event(billing, "parcel-shipped")
			marshaler, err := broker.NewCloudEventsMarshaler(broker.CloudEventsConfig{Source: "/" + ledger, Types: ceTypes, DeduplicateByID: tc.byID})
			if err != nil {
				t.Fatal(err)
			}
			brokers, svc, processed := identityService(t, ledger, marshaler, tc.transactional)
			handled := handleParcels(t, svc, billing)

			for _, ev := range [][2]string{{"/billing-a", "1001"}, {"/billing-b", "1001"}, {"/billing-a", "1001"}, {"/billing-a", "1002"}} {
				body, _ := json.Marshal(ParcelShipped{ParcelID: ev[0] + " " + ev[1]})
				produceRecord(t, brokers, topic, "parcel-1", string(body), // one key: in order
					"ce_specversion", "1.0", "ce_id", ev[1], "ce_source", ev[0],
					"ce_type", "com.example.shop.parcel-shipped", "content-type", "application/json")
			}
			if got := receiveUntil(t, handled, "/billing-a 1002"); !slices.Equal(got, tc.want) {
				t.Errorf("handled %q, want %q", got, tc.want)
			}
			kototest.WaitFor(t, "a stored row per event handled", func() bool { return processed() == len(tc.want) })
		})
	}
}

// identityService returns the service ledger reading with marshaler, whose
// idempotent consumers claim in the handler's transaction or check and
// mark with the PostgreSQL store, its brokers, and a count of the store's
// rows.
func identityService(t *testing.T, ledger string, marshaler kafka.MarshalerUnmarshaler, transactional bool) ([]string, *cqrs.Service, func() int) {
	t.Helper()
	if transactional {
		e := newDurableEnv(t)
		svc := e.serviceWith(cqrs.ServiceConfig{Name: ledger, Broker: broker.Config{Marshaler: marshaler}})
		return e.brokers, svc, func() int { return len(processedIDs(t, e.pool, e.schema)) }
	}
	store, pool, schema := newPostgresStore(t)
	brokers := kototest.Brokers(t)
	svc := newService(t, brokers, cqrs.ServiceConfig{
		Name: ledger, AutoProvisionTopics: true, Store: store, Broker: broker.Config{Marshaler: marshaler},
	})
	return brokers, svc, func() int { return len(processedIDs(t, pool, schema)) }
}

// handleParcels registers on svc a consumer of the ParcelShipped events of
// the service from, runs it, and returns the parcel IDs it handles.
func handleParcels(t *testing.T, svc *cqrs.Service, from string) <-chan string {
	t.Helper()
	handled := make(chan string, 8)
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err := svc.Register(kototest.Context(t), r, cqrs.NewEventConsumer(func(ctx context.Context, ev *ParcelShipped) error {
		handled <- ev.ParcelID
		return nil
	}, cqrs.From(from)))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	kototest.RunRouter(t, r)
	return handled
}

// receiveUntil receives parcel IDs from handled up to last, and returns
// them.
func receiveUntil(t *testing.T, handled <-chan string, last string) []string {
	t.Helper()
	var got []string
	for !slices.Contains(got, last) {
		got = append(got, kototest.Receive(t, handled, "parcel "+last))
	}
	return got
}
