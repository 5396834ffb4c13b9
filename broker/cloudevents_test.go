package broker_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
)

const (
	ceID          = "0190c5a4-9d7e-7000-8000-00000000002a"
	ceTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

func newCloudEvents(t *testing.T, cfg broker.CloudEventsConfig) kafka.MarshalerUnmarshaler {
	t.Helper()
	m, err := broker.NewCloudEventsMarshaler(cfg)
	if err != nil {
		t.Fatalf("NewCloudEventsMarshaler: %v", err)
	}
	return m
}

// TestCloudEventsMarshalBinary checks the binary-mode record written for a
// message with every mapped key: attribute headers, extensions, the record
// key, and the other metadata passed on as headers.
func TestCloudEventsMarshalBinary(t *testing.T) {
	m := newCloudEvents(t, broker.CloudEventsConfig{Source: "/orders", Types: broker.TypeNames{Prefix: "com.example.shop."}})
	msg := message.NewMessage(ceID, []byte(`{"orderId":"o-7"}`))
	msg.Metadata = message.Metadata{
		"name": "order-placed", "correlation_id": "corr-1", "traceparent": ceTraceParent, "tracestate": "vendor=1",
		"partition_key": "o-7", "ce_time": "2026-03-04T05:06:07.123456Z", "ce_subject": "o-7", "koto_reply_to": "orders.replies",
	}
	rec, err := m.Marshal("orders.order-placed", msg)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	want := []header{
		{"ce_specversion", "1.0"}, {"ce_id", ceID}, {"ce_source", "/orders"}, {"ce_type", "com.example.shop.order-placed"},
		{"ce_time", "2026-03-04T05:06:07.123456Z"}, {"content-type", "application/json"}, {"ce_correlationid", "corr-1"},
		{"ce_traceparent", ceTraceParent}, {"ce_tracestate", "vendor=1"}, {"ce_partitionkey", "o-7"},
		{"ce_subject", "o-7"}, {"koto_reply_to", "orders.replies"},
	}
	if got := producedHeaders(rec); !slices.Equal(got, want) {
		t.Errorf("headers:\n%v\nwant:\n%v", got, want)
	}
	if key := recordKey(t, rec); key != "o-7" {
		t.Errorf("record key %q, want the partition key o-7", key)
	}

	plain := message.NewMessage(ceID, []byte(`{}`))
	plain.Metadata.Set("name", "order-placed")
	rec, err = m.Marshal("orders.order-placed", plain)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	i := slices.IndexFunc(rec.Headers, func(h sarama.RecordHeader) bool { return string(h.Key) == "ce_time" })
	if i < 0 {
		t.Fatalf("no ce_time header in %v", producedHeaders(rec))
	}
	if _, err := time.Parse(time.RFC3339Nano, string(rec.Headers[i].Value)); err != nil || rec.Key != nil {
		t.Errorf("ce_time %q (%v) and key %v, want the time of writing and no key", rec.Headers[i].Value, err, rec.Key)
	}
}

// TestCloudEventsMarshalRefusesIncompleteMessages checks that a message
// without an ID or a type name is refused rather than written as an
// invalid CloudEvent.
func TestCloudEventsMarshalRefusesIncompleteMessages(t *testing.T) {
	m := newCloudEvents(t, broker.CloudEventsConfig{Source: "/orders"})
	noType := message.NewMessage(ceID, nil)
	noID := message.NewMessage("", nil)
	noID.Metadata.Set("name", "order-placed")
	for name, msg := range map[string]*message.Message{"no type": noType, "no ID": noID} {
		if _, err := m.Marshal("t", msg); err == nil {
			t.Errorf("Marshal of a message with %s succeeded, want an error", name)
		}
	}
}

// TestCloudEventsUnmarshalBinary reads a binary-mode record as the
// CloudEvents Kafka binding writes it and checks every mapping, then that
// writing the message again gives the same headers.
func TestCloudEventsUnmarshalBinary(t *testing.T) {
	m := newCloudEvents(t, broker.CloudEventsConfig{Source: "/payments", Types: broker.TypeNames{
		Prefix: "com.example.shop.", Names: map[string]string{"stock-reserved": "io.inventory.StockReserved"},
	}})
	rec := record("o-7", `{"orderId":"o-7"}`,
		header{"ce_specversion", "1.0"}, header{"ce_id", ceID}, header{"ce_source", "/orders"},
		header{"ce_type", "com.example.shop.order-placed"}, header{"ce_time", "2026-03-04T05:06:07Z"},
		header{"content-type", "application/json"}, header{"ce_correlationid", "corr-1"},
		header{"ce_traceparent", ceTraceParent}, header{"ce_tracestate", "vendor=1"},
		header{"ce_partitionkey", "o-7"}, header{"ce_myext", "x"}, header{"tenant", "acme"})
	msg, err := m.Unmarshal(rec)
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	assertMessage(t, msg, ceID, `{"orderId":"o-7"}`, map[string]string{
		"name": "order-placed", "correlation_id": "corr-1", "traceparent": ceTraceParent, "tracestate": "vendor=1",
		"partition_key": "o-7", "content-type": "application/json", "ce_source": "/orders",
		"ce_time": "2026-03-04T05:06:07Z", "ce_myext": "x", "tenant": "acme",
		koto.IdempotencyKeyMetadataKey: `"/orders" ` + ceID,
	})
	out, err := m.Marshal("t", msg)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if got, want := sortedHeaders(producedHeaders(out)), sortedHeaders(headersOf(rec)); !slices.Equal(got, want) {
		t.Errorf("written again, headers:\n%v\nwant the record's:\n%v", got, want)
	}

	mapped, err := m.Unmarshal(record("", "{}", header{"ce_specversion", "1.0"}, header{"ce_id", ceID},
		header{"ce_source", "/inventory"}, header{"ce_type", "io.inventory.StockReserved"}))
	if err != nil || mapped.Metadata.Get("name") != "stock-reserved" {
		t.Errorf("type io.inventory.StockReserved read as %q (%v), want its entry in Names, stock-reserved", mapped.Metadata.Get("name"), err)
	}
}

// TestCloudEventsUnmarshalStructured reads structured-mode records: data
// as JSON, as a string and as base64.
func TestCloudEventsUnmarshalStructured(t *testing.T) {
	m := newCloudEvents(t, broker.CloudEventsConfig{Source: "/payments"})
	for _, tc := range []struct {
		name, body, payload, contentType string
	}{
		{"JSON data", `{"specversion":"1.0","id":"e-1","source":"/orders","type":"order-placed","correlationid":"corr-1",` +
			`"datacontenttype":"application/json","data":{"orderId": "o-7"},"priority":3}`, `{"orderId": "o-7"}`, "application/json"},
		{"no datacontenttype", `{"specversion":"1.0","id":"e-1","source":"/orders","type":"order-placed","correlationid":"corr-1","data":[1,2],"priority":3}`,
			`[1,2]`, "application/json"},
		{"text data", `{"specversion":"1.0","id":"e-1","source":"/orders","type":"order-placed","correlationid":"corr-1",` +
			`"datacontenttype":"text/plain","data":"hello","priority":3}`, "hello", "text/plain"},
		{"base64 data", `{"specversion":"1.0","id":"e-1","source":"/orders","type":"order-placed","correlationid":"corr-1",` +
			`"datacontenttype":"application/octet-stream","data_base64":"AAEC","priority":3}`, "\x00\x01\x02", "application/octet-stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := m.Unmarshal(record("o-7", tc.body, header{"content-type", "application/cloudevents+json; charset=utf-8"}, header{"tenant", "acme"}))
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			assertMessage(t, msg, "e-1", tc.payload, map[string]string{
				"name": "order-placed", "correlation_id": "corr-1", "partition_key": "o-7", "content-type": tc.contentType,
				"ce_source": "/orders", "ce_priority": "3", "tenant": "acme", koto.IdempotencyKeyMetadataKey: `"/orders" e-1`,
			})
		})
	}
}

// TestCloudEventsInvalidRecordsAreMarked feeds records that are not valid
// CloudEvents: each is read without an error as a message that keeps the
// record's value, headers and key and carries the reason, and such a
// message is written back as it was read.
func TestCloudEventsInvalidRecordsAreMarked(t *testing.T) {
	m := newCloudEvents(t, broker.CloudEventsConfig{Source: "/payments"})
	valid := []header{{"ce_specversion", "1.0"}, {"ce_id", ceID}, {"ce_source", "/orders"}, {"ce_type", "order-placed"}}
	without := func(key string) []header {
		return slices.DeleteFunc(slices.Clone(valid), func(h header) bool { return h.key == key })
	}
	with := func(key, value string) []header {
		return append(without(key), header{key, value})
	}
	structured := header{"content-type", "application/cloudevents+json"}
	for _, tc := range []struct {
		name, value, reason string
		headers             []header
	}{
		{"no ce_id", "{}", "required attribute missing or empty: id", without("ce_id")},
		{"empty ce_source", "{}", "missing or empty: source", with("ce_source", "")},
		{"no ce_type", "{}", "missing or empty: type", without("ce_type")},
		{"specversion 0.3", "{}", `specversion "0.3" is not 1.0`, with("ce_specversion", "0.3")},
		{"bad time", "{}", "is not an RFC 3339 timestamp", with("ce_time", "yesterday")},
		{"not a CloudEvent", "{}", "not a CloudEvent: no ce_specversion header", []header{{"name", "order-placed"}}},
		{"structured, not JSON", "{not json", "not a JSON object", []header{structured}},
		{"structured, no id", `{"specversion":"1.0","source":"/o","type":"t"}`, "missing or empty: id", []header{structured}},
		{"structured, object attribute", `{"specversion":"1.0","id":"1","source":"/o","type":"t","ext":{}}`, `attribute "ext"`, []header{structured}},
		{"structured, two data", `{"specversion":"1.0","id":"1","source":"/o","type":"t","data":1,"data_base64":"AA=="}`, "both data and data_base64", []header{structured}},
		{"structured, bad base64", `{"specversion":"1.0","id":"1","source":"/o","type":"t","data_base64":"%%"}`, "not a base64 string", []header{structured}},
		{"batch", "[]", "batched CloudEvents", []header{{"content-type", "application/cloudevents-batch+json"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := record("o-7", tc.value, tc.headers...)
			msg, err := m.Unmarshal(rec)
			if err != nil {
				t.Fatalf("Unmarshal: %v; an invalid record must not fail the partition", err)
			}
			invalid := koto.InvalidRecord(msg)
			if !errors.Is(invalid, koto.ErrInvalidRecord) || !strings.Contains(invalid.Error(), tc.reason) {
				t.Fatalf("InvalidRecord = %v, want ErrInvalidRecord with %q", invalid, tc.reason)
			}
			want := map[string]string{"partition_key": "o-7", koto.InvalidRecordMetadataKey: msg.Metadata.Get(koto.InvalidRecordMetadataKey)}
			for _, h := range tc.headers {
				want[h.key] = h.value
			}
			assertMessage(t, msg, msg.UUID, tc.value, want)
			out, err := m.Marshal("orders.dead-letter", msg)
			if err != nil {
				t.Fatalf("Marshal of the invalid message: %v", err)
			}
			if got := producedHeaders(out); len(got) != len(want) {
				t.Errorf("written again with headers %v, want the metadata %v as it is", got, want)
			}
		})
	}
}

func TestCloudEventsConfigValidate(t *testing.T) {
	err := broker.CloudEventsConfig{
		CorrelationExtension: "Correlation-ID",
		Types:                broker.TypeNames{Names: map[string]string{"a": "x", "b": "x"}},
	}.Validate()
	if !errors.Is(err, koto.ErrInvalidConfig) {
		t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"Source is empty", `CorrelationExtension "Correlation-ID"`, `both map to "x"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to say %q", err, want)
		}
	}
	if _, err := broker.NewCloudEventsMarshaler(broker.CloudEventsConfig{Source: "/o", CorrelationExtension: "id"}); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("an extension named like an attribute: %v, want ErrInvalidConfig", err)
	}
}

// TestCloudEventsReadsWolverineStructured reads a structured event as
// Wolverine's CloudEvents interop writes it to Kafka: the JSON body with
// content-type application/json next to Wolverine's own headers, the
// correlation ID in the traceid extension, unset attributes as null.
func TestCloudEventsReadsWolverineStructured(t *testing.T) {
	m := newCloudEvents(t, broker.CloudEventsConfig{Source: "/payments", CorrelationExtension: "traceid",
		Types: broker.TypeNames{Names: map[string]string{"order-placed": "Shop.Contracts.OrderPlaced"}}})
	body := `{"topic":"orders","tenantid":null,"traceid":"corr-1","tracestate":null,"data":{"OrderId":"o-7"},` +
		`"id":"` + wolverineID + `","specversion":"1.0","datacontenttype":"application/json; charset=utf-8",` +
		`"source":"orders-api","type":"Shop.Contracts.OrderPlaced","time":"2026-03-04T05:06:07.1234567+00:00","traceparent":"` + ceTraceParent + `"}`
	msg, err := m.Unmarshal(record(wolverineID, body, header{"content-type", "application/json"},
		header{"id", wolverineID}, header{"message-type", "Shop.Contracts.OrderPlaced"}))
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	assertMessage(t, msg, wolverineID, `{"OrderId":"o-7"}`, map[string]string{
		"name": "order-placed", "correlation_id": "corr-1", "traceparent": ceTraceParent, "partition_key": wolverineID,
		"content-type": "application/json; charset=utf-8", "ce_source": "orders-api", "ce_time": "2026-03-04T05:06:07.1234567+00:00",
		"ce_topic": "orders", "id": wolverineID, "message-type": "Shop.Contracts.OrderPlaced",
		koto.IdempotencyKeyMetadataKey: `"orders-api" ` + wolverineID,
	})
}

// TestCloudEventsIdempotencyKey: an event read gets the idempotency key
// of its source and id, which no other pair of source and id gives, or
// none with DeduplicateByID; a header of that name from the producer is
// not believed by any mapping, and no mapping writes one.
func TestCloudEventsIdempotencyKey(t *testing.T) {
	event := func(source, id string) *sarama.ConsumerMessage {
		return record("", "{}", header{"ce_specversion", "1.0"}, header{"ce_id", id}, header{"ce_source", source},
			header{"ce_type", "order-placed"}, header{koto.IdempotencyKeyMetadataKey, "forged"})
	}
	bySource := newCloudEvents(t, broker.CloudEventsConfig{Source: "/payments"})
	keys := map[string]string{}
	for _, ev := range [][2]string{{"/a/b", "c"}, {"/a", "b/c"}, {"/a b", "c"}, {"/a", "b c"}, {`/a" `, "c"}, {"/a", `" c`}} {
		msg, err := bySource.Unmarshal(event(ev[0], ev[1]))
		if err != nil {
			t.Fatalf("Unmarshal: %v", err)
		}
		key := msg.Metadata.Get(koto.IdempotencyKeyMetadataKey)
		if other, dup := keys[key]; dup || key == "" || key == "forged" {
			t.Errorf("source %q, id %q: key %q, also of %s; want a key of its own", ev[0], ev[1], key, other)
		}
		keys[key] = ev[0] + "|" + ev[1]
		if msg.UUID != ev[1] {
			t.Errorf("UUID %q, want the id %q", msg.UUID, ev[1])
		}
	}

	byID := newCloudEvents(t, broker.CloudEventsConfig{Source: "/payments", DeduplicateByID: true})
	msg, err := byID.Unmarshal(event("/orders", "1001"))
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if key, ok := msg.Metadata[koto.IdempotencyKeyMetadataKey]; ok {
		t.Errorf("DeduplicateByID: key %q, want none, so that the id is the key", key)
	}

	for name, m := range map[string]kafka.MarshalerUnmarshaler{
		"CloudEvents": bySource, "Wolverine": newWolverine(t),
		"Watermill": broker.NewPartitionKeyMarshaler(),
	} {
		msg := message.NewMessage(ceID, nil)
		msg.Metadata.Set("name", "order-placed")
		msg.Metadata.Set(koto.IdempotencyKeyMetadataKey, "k")
		rec, err := m.Marshal("t", msg)
		if err != nil {
			t.Fatalf("%s: Marshal: %v", name, err)
		}
		if slices.ContainsFunc(rec.Headers, func(h sarama.RecordHeader) bool { return string(h.Key) == koto.IdempotencyKeyMetadataKey }) {
			t.Errorf("%s mapping wrote the header %s", name, koto.IdempotencyKeyMetadataKey)
		}
		in, err := m.Unmarshal(record("", "{}", header{kafka.UUIDHeaderKey, ceID}, header{koto.IdempotencyKeyMetadataKey, "forged"}))
		if err != nil {
			t.Fatalf("%s: Unmarshal: %v", name, err)
		}
		if key := in.Metadata.Get(koto.IdempotencyKeyMetadataKey); key == "forged" {
			t.Errorf("%s mapping took the key from the header", name)
		}
	}
}
