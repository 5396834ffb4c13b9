package broker_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
)

// header is one record header, for golden records.
type header struct{ key, value string }

// record returns a record as a consumer reads it.
func record(key, value string, headers ...header) *sarama.ConsumerMessage {
	rec := &sarama.ConsumerMessage{Topic: "golden", Value: []byte(value)}
	if key != "" {
		rec.Key = []byte(key)
	}
	for _, h := range headers {
		rec.Headers = append(rec.Headers, &sarama.RecordHeader{Key: []byte(h.key), Value: []byte(h.value)})
	}
	return rec
}

// producedHeaders returns the headers of a record being produced, in order.
func producedHeaders(rec *sarama.ProducerMessage) []header {
	hs := make([]header, 0, len(rec.Headers))
	for _, h := range rec.Headers {
		hs = append(hs, header{string(h.Key), string(h.Value)})
	}
	return hs
}

// sortedHeaders returns hs sorted by key, for comparing sets of headers.
func sortedHeaders(hs []header) []header {
	hs = slices.Clone(hs)
	slices.SortFunc(hs, func(a, b header) int { return strings.Compare(a.key, b.key) })
	return hs
}

// headersOf returns the headers of a consumed record.
func headersOf(rec *sarama.ConsumerMessage) []header {
	hs := make([]header, 0, len(rec.Headers))
	for _, h := range rec.Headers {
		hs = append(hs, header{string(h.Key), string(h.Value)})
	}
	return hs
}

// recordKey returns the key of a record being produced; "" for none.
func recordKey(t *testing.T, rec *sarama.ProducerMessage) string {
	t.Helper()
	if rec.Key == nil {
		return ""
	}
	key, err := rec.Key.Encode()
	if err != nil {
		t.Fatalf("record key: %v", err)
	}
	return string(key)
}

// roundTrip marshals msg and reads the record back as a consumer would.
func roundTrip(t *testing.T, m kafka.MarshalerUnmarshaler, msg *message.Message) *message.Message {
	t.Helper()
	rec, err := m.Marshal("golden", msg)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	got, err := m.Unmarshal(consumed(t, rec))
	if err != nil {
		t.Fatalf("Unmarshal of what Marshal wrote: %v", err)
	}
	return got
}

// assertMessage checks a message's UUID, payload and metadata.
func assertMessage(t *testing.T, got *message.Message, uuid, payload string, md map[string]string) {
	t.Helper()
	if got.UUID != uuid || string(got.Payload) != payload {
		t.Errorf("message %q with payload %q, want %q with %q", got.UUID, got.Payload, uuid, payload)
	}
	if !maps.Equal(map[string]string(got.Metadata), md) {
		t.Errorf("metadata:\n%s\nwant:\n%s", formatMap(got.Metadata), formatMap(md))
	}
}

func formatMap(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "  %s=%q\n", k, m[k])
	}
	return b.String()
}
