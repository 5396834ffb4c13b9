package broker_test

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/idempotency"
)

// The golden envelope: an OrderPlaced event as Wolverine's Kafka transport
// writes it with its default envelope mapper. The header names are those of
// Wolverine's EnvelopeConstants; the values are formatted as Wolverine
// formats them (Guid "D" strings, its "yyyy-MM-dd HH:mm:ss:ffffff Z" UTC
// timestamps, the OpenTelemetry activity ID in W3C format as parent-id).
// Headers of the envelope's Headers dictionary, here "tenant", follow.
const (
	wolverineID           = "5b1c3e1a-2f4d-4c6e-9a8b-7d6e5f4a3b2c"
	wolverineConversation = "9e8d7c6b-5a49-4838-a726-150f4e3d2c1b"
	wolverineCorrelation  = "a3f2c1d0e9b8a7f6e5d4c3b2a1f0e9d8"
	wolverineSentAt       = "2026-03-04 05:06:07:123456 Z"
	wolverineBody         = `{"OrderId":"o-7","Total":42.5}`
)

func wolverineGolden(key string) *sarama.ConsumerMessage {
	return record(key, wolverineBody,
		header{"correlation-id", wolverineCorrelation}, header{"id", wolverineID},
		header{"conversation-id", wolverineConversation}, header{"parent-id", ceTraceParent},
		header{"content-type", "application/json"}, header{"source", "orders-api"},
		header{"sent-at", wolverineSentAt}, header{"message-type", "Shop.Contracts.OrderPlaced"},
		header{"accepted-content-types", "application/json"}, header{"attempts", "0"},
		header{"tenant", "acme"})
}

func newWolverine(t *testing.T) kafka.MarshalerUnmarshaler {
	t.Helper()
	m, err := broker.NewWolverineMarshaler(broker.WolverineConfig{Source: "payments", Types: broker.TypeNames{
		Names: map[string]string{"order-placed": "Shop.Contracts.OrderPlaced"},
	}})
	if err != nil {
		t.Fatalf("NewWolverineMarshaler: %v", err)
	}
	return m
}

// TestWolverineReadsGoldenEnvelope reads the golden envelope: the id is the
// message UUID, the mapped headers become this library's keys and every
// other header is kept under its own name.
func TestWolverineReadsGoldenEnvelope(t *testing.T) {
	msg, err := newWolverine(t).Unmarshal(wolverineGolden("o-7"))
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	assertMessage(t, msg, wolverineID, wolverineBody, map[string]string{
		"correlation_id": wolverineCorrelation, "name": "order-placed", "traceparent": ceTraceParent,
		"partition_key": "o-7", "conversation-id": wolverineConversation, "content-type": "application/json",
		"source": "orders-api", "sent-at": wolverineSentAt, "accepted-content-types": "application/json",
		"attempts": "0", "tenant": "acme",
	})

	// Without a partition key Wolverine keys the record with the id: that
	// key is no partition key.
	msg, err = newWolverine(t).Unmarshal(wolverineGolden(wolverineID))
	if err != nil || msg.Metadata.Get("partition_key") != "" {
		t.Errorf("record keyed by its id: partition_key %q (%v), want none", msg.Metadata.Get("partition_key"), err)
	}
}

// TestWolverineWritesGoldenEnvelope writes an event as Wolverine would:
// the golden envelope's headers, with this service's source.
func TestWolverineWritesGoldenEnvelope(t *testing.T) {
	msg := message.NewMessage(wolverineID, []byte(wolverineBody))
	msg.Metadata = message.Metadata{
		"name": "order-placed", "correlation_id": wolverineCorrelation, "traceparent": ceTraceParent,
		"partition_key": "o-7", "sent-at": wolverineSentAt, "conversation-id": wolverineConversation, "tenant": "acme",
	}
	rec, err := newWolverine(t).Marshal("orders.order-placed", msg)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	want := []header{
		{"id", wolverineID}, {"correlation-id", wolverineCorrelation}, {"message-type", "Shop.Contracts.OrderPlaced"},
		{"content-type", "application/json"}, {"source", "payments"}, {"parent-id", ceTraceParent},
		{"sent-at", wolverineSentAt}, {"conversation-id", wolverineConversation}, {"tenant", "acme"},
	}
	if got := producedHeaders(rec); !slices.Equal(got, want) {
		t.Errorf("headers:\n%v\nwant:\n%v", got, want)
	}
	if key := recordKey(t, rec); key != "o-7" {
		t.Errorf("record key %q, want the partition key", key)
	}
	if value, _ := rec.Value.Encode(); string(value) != wolverineBody {
		t.Errorf("value %q, want the payload", value)
	}
}

// TestWolverineRoundTrip checks that a golden envelope read and written
// again keeps every header and its key: a dead letter or republished
// envelope is the envelope Wolverine sent.
func TestWolverineRoundTrip(t *testing.T) {
	m := newWolverine(t)
	for _, key := range []string{"o-7", wolverineID} {
		golden := wolverineGolden(key)
		msg, err := m.Unmarshal(golden)
		if err != nil {
			t.Fatalf("Unmarshal: %v", err)
		}
		rec, err := m.Marshal("t", msg)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		if got, want := sortedHeaders(producedHeaders(rec)), sortedHeaders(headersOf(golden)); !slices.Equal(got, want) {
			t.Errorf("headers written again:\n%v\nwant the golden envelope's:\n%v", got, want)
		}
		if got := recordKey(t, rec); got != key {
			t.Errorf("record key %q, want %q", got, key)
		}
	}
}

// TestWolverineWritesNewEnvelopeDefaults checks what a message that carries
// only what cqrs gives it gets: a Guid id (KeyUUID of an ID that is not a
// UUID), the id as record key, JSON content type, and sent-at now in
// Wolverine's format.
func TestWolverineWritesNewEnvelopeDefaults(t *testing.T) {
	msg := message.NewMessage("order-7-placed", []byte("{}"))
	msg.Metadata.Set("name", "stock-reserved")
	got := roundTrip(t, newWolverine(t), msg)
	id := idempotency.KeyUUID("order-7-placed").String()
	if got.UUID != id {
		t.Errorf("id %q, want KeyUUID of the message ID, %q", got.UUID, id)
	}
	sentAt := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{6} Z$`)
	if md := got.Metadata; md.Get("name") != "stock-reserved" || md.Get("content-type") != "application/json" ||
		md.Get("source") != "payments" || !sentAt.MatchString(md.Get("sent-at")) || md.Get("partition_key") != "" {
		t.Errorf("metadata read back %v: want the type name, JSON, source payments, sent-at as Wolverine writes it, no partition key", md)
	}
}

func TestWolverineConfigValidate(t *testing.T) {
	err := broker.WolverineConfig{Types: broker.TypeNames{Names: map[string]string{"a": ""}}}.Validate()
	if !errors.Is(err, koto.ErrInvalidConfig) || !strings.Contains(err.Error(), "Source is empty") || !strings.Contains(err.Error(), "neither may be empty") {
		t.Errorf("Validate = %v, want ErrInvalidConfig naming Source and the empty wire name", err)
	}
}
