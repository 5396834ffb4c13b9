package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

// TestDLQReadsEveryMapping dead-letters records of a consumer that reads
// CloudEvents, and of one that reads Wolverine's envelope, both sending
// their dead letters through a publisher of Watermill's mapping: list
// -type, -uuid and -correlation find them by their own headers, show UUID
// shows one, and -mapping reads them as one mapping. Then a discard
// (-dry-run first) of one of them: list shows it discarded, a replay skips
// it and sends the other, which the fixed consumer handles.
func TestDLQReadsEveryMapping(t *testing.T) {
	addr := startKotoKafka(t)
	cfg := broker.Config{Brokers: []string{addr}}
	for _, tc := range []struct {
		mapping, typ string
		marshaler    func(t *testing.T) kafka.MarshalerUnmarshaler
		headers      func(id, corr string) []kgo.RecordHeader
	}{
		{"cloudevents", "com.example.shop.order-placed", func(t *testing.T) kafka.MarshalerUnmarshaler {
			m, err := broker.NewCloudEventsMarshaler(broker.CloudEventsConfig{Source: "/payments", Types: broker.TypeNames{Prefix: "com.example.shop."}})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}, func(id, corr string) []kgo.RecordHeader {
			return []kgo.RecordHeader{{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_id", Value: []byte(id)},
				{Key: "ce_source", Value: []byte("/shop")}, {Key: "ce_type", Value: []byte("com.example.shop.order-placed")},
				{Key: "ce_correlationid", Value: []byte(corr)}, {Key: "content-type", Value: []byte("application/json")}}
		}},
		{"wolverine", "Shop.Contracts.OrderPlaced", func(t *testing.T) kafka.MarshalerUnmarshaler {
			m, err := broker.NewWolverineMarshaler(broker.WolverineConfig{Source: "payments", Types: broker.TypeNames{
				Names: map[string]string{"order-placed": "Shop.Contracts.OrderPlaced"}}})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}, func(id, corr string) []kgo.RecordHeader {
			return []kgo.RecordHeader{{Key: "id", Value: []byte(id)}, {Key: "message-type", Value: []byte("Shop.Contracts.OrderPlaced")},
				{Key: "correlation-id", Value: []byte(corr)}, {Key: "content-type", Value: []byte("application/json")}}
		}},
	} {
		t.Run(tc.mapping, func(t *testing.T) {
			group := kototest.Group(t, "payments.order-placed-consumer")
			topic := kototest.Topic(t, "orders.order-placed")
			kototest.Provision(t, cfg, topic, topics.DeadLetter(group))
			p := &payments{}
			p.runWith(t, cfg, broker.Config{Brokers: cfg.Brokers, Marshaler: tc.marshaler(t)}, group, topic)
			ids := []string{"0190c5a4-9d7e-7000-8000-00000000002a", "0190c5a4-9d7e-7000-8000-00000000002b"}
			var recs []*kgo.Record
			for i, id := range ids {
				recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("o-1"), Value: []byte(`{"order":"o-1","amount":-5}`),
					Headers: tc.headers(id, "corr-"+string(rune('a'+i)))})
			}
			kototest.Produce(t, cfg.Brokers, recs)
			var listed []map[string]any
			waitForList(t, addr, group, &listed, 2)

			for _, args := range [][]string{{"-type", tc.typ}, {"-uuid", ids[0]}, {"-correlation", "corr-a"}} {
				out, stderr, code := koto(t, addr, append([]string{"dlq", "list", "-group", group, "-json"}, args...)...)
				var got []map[string]any
				if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got) == 0 || got[0]["uuid"] != ids[0] ||
					got[0]["type_name"] != tc.typ || got[0]["correlation_id"] != "corr-a" || got[0]["mapping"] != tc.mapping {
					t.Errorf("list %v (exit %d, %v): %s%s; want %s of type %s with corr-a read as %s", args, code, err, out, stderr, ids[0], tc.typ, tc.mapping)
				}
			}
			out, stderr, code := koto(t, addr, "dlq", "show", "-group", group, ids[0])
			for _, want := range []string{"uuid:", ids[0], "type:", tc.typ, "correlation id:", "corr-a", "mapping:", tc.mapping, "state:", "pending"} {
				if code != 0 || !strings.Contains(out, want) {
					t.Fatalf("show %s (exit %d) lacks %q:\n%s%s", ids[0], code, want, out, stderr)
				}
			}
			if out, _, code := koto(t, addr, "dlq", "list", "-group", group, "-json", "-mapping", "watermill", "-uuid", ids[0]); code != 0 || strings.TrimSpace(out) != "[]" {
				t.Errorf("list -mapping watermill -uuid (exit %d): %s; want nothing, read as Watermill's the records have no UUID", code, out)
			}

			out, _, code = koto(t, addr, "dlq", "discard", "-group", group, "-uuid", ids[0], "-dry-run")
			if code != 0 || !strings.Contains(out, "dry run: would discard 1 dead letter of") || !strings.Contains(out, ids[0]) {
				t.Fatalf("discard -dry-run (exit %d):\n%s", code, out)
			}
			if out, _, code = koto(t, addr, "dlq", "discard", "-group", group, "-uuid", ids[0], "-v"); code != 0 ||
				!strings.Contains(out, "discarded 1 dead letter of") || !strings.Contains(out, "discarded ") {
				t.Fatalf("discard (exit %d):\n%s", code, out)
			}
			out, _, code = koto(t, addr, "dlq", "list", "-group", group)
			if code != 0 || !strings.Contains(out, "discarded") || !strings.Contains(out, "(0 replayed, 1 discarded") {
				t.Fatalf("list after the discard (exit %d):\n%s", code, out)
			}
			p.fix()
			out, _, code = koto(t, addr, "dlq", "replay", "-group", group)
			if code != 0 || !strings.Contains(out, "sent 1 dead letter from") || !strings.Contains(out, "1 discarded") {
				t.Fatalf("replay after the discard (exit %d):\n%s", code, out)
			}
			kototest.WaitFor(t, "the replayed dead letter handled", func() bool { return len(p.handledUUIDs()) >= 1 })
			if got := p.handledUUIDs(); !slices.Equal(got, ids[1:]) {
				t.Errorf("handled %v, want only %s: the discarded one is never replayed", got, ids[1])
			}
		})
	}
}
