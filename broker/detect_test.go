package broker_test

import (
	"context"
	"errors"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestMappingReaderReadsEveryMapping reads a record of each mapping, and
// of none, with one reader that detects the mapping of each: UUID, type
// name and correlation ID come out of each mapping's own headers. The
// configured CloudEvents mapping reads its records with its type names; a
// forced mapping reads every record as that mapping.
func TestMappingReaderReadsEveryMapping(t *testing.T) {
	structured := record("o-7", `{"specversion":"1.0","id":"`+ceID+`","source":"/orders","type":"com.example.shop.order-placed","correlationid":"corr-s","data":{"orderId":"o-7"}}`,
		header{"content-type", "application/cloudevents+json"})
	// Wolverine's CloudEvents interop: a structured event in the body,
	// its envelope's headers beside it.
	interop := record("o-7", `{"specversion":"1.0","id":"`+ceID+`","source":"/orders","type":"com.example.shop.order-placed","correlationid":"corr-i","data":{}}`,
		header{"content-type", "application/json"}, header{"id", wolverineID}, header{"message-type", "Shop.Contracts.OrderPlaced"})
	binary := record("o-7", `{}`, header{"ce_specversion", "1.0"}, header{"ce_id", ceID}, header{"ce_source", "/orders"},
		header{"ce_type", "com.example.shop.order-placed"}, header{"ce_correlationid", "corr-b"}, header{"dead_letter_reason", "boom"})
	watermill := record("o-7", `{}`, header{"_watermill_message_uuid", "u-1"}, header{"name", "order-placed"}, header{"correlation_id", "corr-w"},
		header{"id", "not-wolverine"}, header{"message-type", "x"})
	foreign := record("o-7", `{}`, header{"tenant", "acme"})
	for _, tc := range []struct {
		name       string
		rec        *sarama.ConsumerMessage
		configured bool
		mapping    broker.Mapping
		uuid, typ  string
		corr       string
	}{
		{"binary CloudEvent", binary, false, broker.MappingCloudEvents, ceID, "com.example.shop.order-placed", "corr-b"},
		{"binary CloudEvent, configured", binary, true, broker.MappingCloudEvents, ceID, "order-placed", "corr-b"},
		{"structured CloudEvent", structured, false, broker.MappingCloudEvents, ceID, "com.example.shop.order-placed", "corr-s"},
		{"Wolverine's CloudEvents interop", interop, false, broker.MappingCloudEvents, ceID, "com.example.shop.order-placed", "corr-i"},
		{"Wolverine envelope", wolverineGolden("o-7"), false, broker.MappingWolverine, wolverineID, "Shop.Contracts.OrderPlaced", wolverineCorrelation},
		{"Watermill", watermill, false, broker.MappingWatermill, "u-1", "order-placed", "corr-w"},
		{"Watermill, CloudEvents configured", watermill, true, broker.MappingWatermill, "u-1", "order-placed", "corr-w"},
		{"another producer's", foreign, false, broker.MappingWatermill, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			configured := newCloudEvents(t, broker.CloudEventsConfig{Source: "/payments", Types: broker.TypeNames{Prefix: "com.example.shop."}})
			r, err := broker.NewMappingReader("", nil)
			if tc.configured {
				r, err = broker.NewMappingReader("", configured)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := broker.DetectMapping(tc.rec); got != tc.mapping || r.Mapping(tc.rec) != tc.mapping {
				t.Errorf("DetectMapping = %q, reader's %q; want %q", got, r.Mapping(tc.rec), tc.mapping)
			}
			msg, err := r.Unmarshal(tc.rec)
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if msg.UUID != tc.uuid || msg.Metadata.Get(koto.TypeNameMetadataKey) != tc.typ || msg.Metadata.Get("correlation_id") != tc.corr {
				t.Errorf("read UUID %q type %q correlation %q; want %q %q %q", msg.UUID, msg.Metadata.Get(koto.TypeNameMetadataKey),
					msg.Metadata.Get("correlation_id"), tc.uuid, tc.typ, tc.corr)
			}
		})
	}

	forced, err := broker.NewMappingReader(broker.MappingWolverine, nil)
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := forced.Unmarshal(watermill); err != nil || msg.UUID != "not-wolverine" || forced.Mapping(watermill) != broker.MappingWolverine {
		t.Errorf("forced Wolverine reader: UUID %q, %v; want the id header's", msg.UUID, err)
	}
	if _, err := broker.NewMappingReader("avro", nil); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("NewMappingReader(avro) = %v, want ErrInvalidConfig", err)
	}
}

// TestPublisherWritesVerbatim publishes, through a publisher of each
// mapping, a message marked to be written as a record
// (koto.ContextWithVerbatim): Kafka gets that record byte for byte, key,
// headers in order and value, whatever the message's own UUID, metadata
// and payload.
func TestPublisherWritesVerbatim(t *testing.T) {
	brokers := kototest.Brokers(t)
	want := koto.Record{Key: []byte("k\x00ey"), Value: []byte("\xffvalue"), Headers: []koto.Header{
		{Key: []byte("id"), Value: []byte(wolverineID)}, {Key: []byte("ce_id"), Value: []byte("x")},
		{Key: []byte("dup"), Value: []byte("1")}, {Key: []byte("dup"), Value: []byte("2")}, {Key: []byte("empty"), Value: nil},
	}}
	for _, m := range []struct {
		name string
		cfg  broker.Config
	}{
		{"watermill", broker.Config{Brokers: brokers}},
		{"cloudevents", broker.Config{Brokers: brokers, Marshaler: newCloudEvents(t, broker.CloudEventsConfig{Source: "/payments"})}},
		{"wolverine", broker.Config{Brokers: brokers, Marshaler: newWolverine(t)}},
	} {
		t.Run(m.name, func(t *testing.T) {
			topic := kototest.NewTopic(t, m.cfg, "verbatim")
			pub := kototest.NewPublisher(t, m.cfg)
			msg := message.NewMessage("uuid-of-the-message", []byte("its payload"))
			msg.Metadata.Set(koto.TypeNameMetadataKey, "order-placed")
			msg.SetContext(koto.ContextWithVerbatim(context.Background(), want))
			if err := pub.Publish(topic, msg); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			recs := kototest.ReadAll(t, brokers, topic)
			if len(recs) != 1 {
				t.Fatalf("%d records, want 1", len(recs))
			}
			got := recs[0]
			if string(got.Key) != string(want.Key) || string(got.Value) != string(want.Value) || len(got.Headers) != len(want.Headers) {
				t.Fatalf("record key %q value %q %d headers, want %q %q %d", got.Key, got.Value, len(got.Headers), want.Key, want.Value, len(want.Headers))
			}
			for i, h := range got.Headers {
				if h.Key != string(want.Headers[i].Key) || string(h.Value) != string(want.Headers[i].Value) {
					t.Errorf("header %d: %s=%q, want %s=%q", i, h.Key, h.Value, want.Headers[i].Key, want.Headers[i].Value)
				}
			}
		})
	}
}
