package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/middleware"
)

// keptPublisher keeps what it is given, context included, and refuses the
// first tooLarge calls as Kafka refuses a record that is too large.
type keptPublisher struct {
	mu       sync.Mutex
	tooLarge int
	got      []*message.Message
}

func (p *keptPublisher) Publish(_ string, msgs ...*message.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tooLarge > 0 {
		p.tooLarge--
		return fmt.Errorf("refused: %w", koto.ErrMessageTooLarge)
	}
	p.got = append(p.got, msgs...)
	return nil
}

func (p *keptPublisher) Close() error { return nil }

// consumedMessage is a message as the broker's subscriber hands out rec,
// read from orders partition 2 offset 40.
func consumedMessage(rec koto.Record, md map[string]string) *message.Message {
	msg := message.NewMessage("m-1", []byte("payload as the mapping read it"))
	for k, v := range md {
		msg.Metadata.Set(k, v)
	}
	ctx := koto.ContextWithPosition(context.Background(), koto.Position{Topic: "orders", Partition: 2, Offset: 40, Key: rec.Key})
	msg.SetContext(koto.ContextWithConsumedRecord(ctx, rec))
	return msg
}

// deadLetterOf runs msg through DeadLetter with a poison handler and
// returns what reached pub.
func deadLetterOf(t *testing.T, pub *keptPublisher, msg *message.Message) *message.Message {
	t.Helper()
	m, err := middleware.DeadLetter(pub, middleware.DeadLetterConfig{Topic: "orders.dlq"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m(func(*message.Message) ([]*message.Message, error) {
		return nil, koto.Poison(errors.New("amount is negative"))
	})(msg); err != nil {
		t.Fatalf("dead letter not published: %v", err)
	}
	if len(pub.got) != 1 {
		t.Fatalf("%d dead letters, want 1", len(pub.got))
	}
	return pub.got[0]
}

func headerList(rec koto.Record) []string {
	var out []string
	for _, h := range rec.Headers {
		out = append(out, string(h.Key)+"="+string(h.Value))
	}
	return out
}

// TestDeadLetterIsTheConsumedRecord: the dead letter of a message read
// from a Kafka record is marked to be written as that record: its key and
// value, its headers in order, those of an earlier failure replaced (the
// replay's origin kept), then the failure's. The message it publishes
// still carries the failure in its metadata for other publishers.
func TestDeadLetterIsTheConsumedRecord(t *testing.T) {
	rec := koto.Record{Key: []byte("o-7"), Value: []byte(`{"specversion":"1.0"}`), Headers: []koto.Header{
		{Key: []byte("ce_id"), Value: []byte("ev-1")}, {Key: []byte("dead_letter_reason"), Value: []byte("an earlier failure")},
		{Key: []byte("ce_type"), Value: []byte("com.example.order-placed")}, {Key: []byte("dead_letter_replayed_from"), Value: []byte("orders.dlq/0/3")},
	}}
	pub := &keptPublisher{}
	dl := deadLetterOf(t, pub, consumedMessage(rec, map[string]string{correlation.MetadataKey: "corr-1"}))
	got, ok := koto.VerbatimFromContext(dl.Context())
	if !ok {
		t.Fatal("the dead letter is not marked to be written as the consumed record")
	}
	if string(got.Key) != "o-7" || string(got.Value) != string(rec.Value) {
		t.Errorf("verbatim key %q value %q, want the record's", got.Key, got.Value)
	}
	hs := headerList(got)
	want := []string{"ce_id=ev-1", "ce_type=com.example.order-placed", "dead_letter_replayed_from=orders.dlq/0/3",
		"dead_letter_reason=amount is negative", "dead_letter_error_type=*errors.errorString", "dead_letter_error_class=poison",
		"dead_letter_original_topic=orders", "dead_letter_original_partition=2", "dead_letter_original_offset=40",
		"dead_letter_consumer_group=", "dead_letter_handler=", "dead_letter_attempts=1"}
	if len(hs) != len(want)+1 || !strings.HasPrefix(hs[len(want)], "dead_letter_failed_at=") {
		t.Fatalf("verbatim headers %q, want %q and the failure time", hs, want)
	}
	for i := range want {
		if hs[i] != want[i] {
			t.Errorf("verbatim header %d: %q, want %q", i, hs[i], want[i])
		}
	}
	if dl.Metadata.Get("dead_letter_reason") != "amount is negative" || dl.UUID != "m-1" {
		t.Errorf("dead letter message %s metadata %v, want the failure in it too", dl.UUID, dl.Metadata)
	}
}

// TestDeadLetterAddsTheCorrelationIDItGaveTheRecord: a record without a
// correlation ID gets, on its dead letter, the one its delivery ran with,
// as correlation_id, which every mapping reads back.
func TestDeadLetterAddsTheCorrelationIDItGaveTheRecord(t *testing.T) {
	msg := consumedMessage(koto.Record{Value: []byte("{}"), Headers: []koto.Header{{Key: []byte("id"), Value: []byte("w-1")}}}, nil)
	msg.SetContext(correlation.WithID(msg.Context(), "given"))
	got, _ := koto.VerbatimFromContext(deadLetterOf(t, &keptPublisher{}, msg).Context())
	if hs := headerList(got); len(hs) < 2 || hs[0] != "id=w-1" || hs[1] != "correlation_id=given" {
		t.Errorf("verbatim headers %q, want the record's, then correlation_id=given", hs)
	}
}

// TestDeadLetterWithoutRecordIsTheMessage: a message that did not come
// from Kafka is dead-lettered as a message, unmarked.
func TestDeadLetterWithoutRecordIsTheMessage(t *testing.T) {
	dl := deadLetterOf(t, &keptPublisher{}, message.NewMessage("m-1", []byte("{}")))
	if _, ok := koto.VerbatimFromContext(dl.Context()); ok {
		t.Error("a dead letter without a consumed record is marked verbatim")
	}
	if dl.Metadata.Get("dead_letter_reason") == "" || dl.Metadata.Get("dead_letter_original_partition") != "" {
		t.Errorf("dead letter metadata %v", dl.Metadata)
	}
}

// TestDroppedDeadLetterOfARecord: the dead letter of a record that Kafka
// refuses as too large is sent again as the record without its value and
// its headers of more than 1 KiB, keeping its key and its other headers,
// with the failure (its reason cut to 1 KiB) and dead_letter_dropped.
func TestDroppedDeadLetterOfARecord(t *testing.T) {
	rec := koto.Record{Key: []byte("o-7"), Value: []byte(strings.Repeat("v", 5000)), Headers: []koto.Header{
		{Key: []byte("ce_id"), Value: []byte("ev-1")}, {Key: []byte("note"), Value: []byte(strings.Repeat("n", 2000))},
		{Key: []byte("ce_type"), Value: []byte("order-placed")},
	}}
	pub := &keptPublisher{tooLarge: 1}
	m, err := middleware.DeadLetter(pub, middleware.DeadLetterConfig{Topic: "orders.dlq"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m(func(*message.Message) ([]*message.Message, error) {
		return nil, koto.Poison(errors.New(strings.Repeat("r", 3000)))
	})(consumedMessage(rec, nil)); err != nil {
		t.Fatalf("dropped dead letter not published: %v", err)
	}
	got, ok := koto.VerbatimFromContext(pub.got[0].Context())
	if !ok || string(got.Key) != "o-7" || got.Value != nil {
		t.Fatalf("dropped dead letter: marked %v key %q %d value bytes; want the key without the value", ok, got.Key, len(got.Value))
	}
	byKey := map[string]string{}
	for _, h := range got.Headers {
		byKey[string(h.Key)] = string(h.Value)
	}
	if byKey["ce_id"] != "ev-1" || byKey["ce_type"] != "order-placed" || byKey["note"] != "" || len(byKey["dead_letter_reason"]) != 1024 ||
		!strings.Contains(byKey["dead_letter_dropped"], "value (5000 bytes) and 1 headers left out") || byKey["dead_letter_original_offset"] != "40" {
		t.Errorf("dropped dead letter headers %v", byKey)
	}
	if _, err := time.Parse(time.RFC3339Nano, byKey["dead_letter_failed_at"]); err != nil {
		t.Errorf("dropped dead letter failed_at: %v", err)
	}
}
