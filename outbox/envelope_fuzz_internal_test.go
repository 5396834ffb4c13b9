package outbox

import (
	"bytes"
	"errors"
	"maps"
	"testing"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/topics"
)

// FuzzUnwrap reads outbox rows as any writer could have left them, this
// package's Publisher, Watermill's forwarder or a hand-written INSERT. A
// row either gives a message for a valid Kafka topic or an error wrapping
// errBadEnvelope (the forwarder logs and skips it); an envelope that wrap
// wrote unwraps to the same topic and message.
func FuzzUnwrap(f *testing.F) {
	f.Add([]byte(`{"destination_topic":"orders","uuid":"u","payload":"eyJpZCI6N30=","metadata":{"k":"v"}}`), "orders", "u", []byte(`{"id":7}`), "k", "v")
	f.Add([]byte(`{"destination_topic":"a/b","uuid":"u"}`), "a/b", "", []byte(nil), "", "")
	f.Add([]byte(`{"destination_topic":"","payload":"!!"}`), "..", "\x00", []byte{0xff}, "\xff", "\xfe")
	f.Add([]byte(`null`), "x; DROP TOPIC y", "u", []byte{}, "correlation_id", "c")
	f.Add([]byte(`{"destination_topic":"t","metadata":null,"payload":null}`), "t", "u", []byte("p"), "", "")
	f.Add([]byte(`[`), "t", "u", []byte("p"), "k", "")
	f.Fuzz(func(t *testing.T, row []byte, topic, uuid string, payload []byte, key, value string) {
		if got, msg, err := unwrap(row); err != nil {
			if !errors.Is(err, errBadEnvelope) {
				t.Fatalf("unwrap(%q): %v; want errBadEnvelope", row, err)
			}
		} else if msg == nil || topics.Validate(got) != nil {
			t.Fatalf("unwrap(%q) = topic %q, message %v; want a valid topic and a message", row, got, msg)
		}

		msg := message.NewMessage(uuid, payload)
		msg.Metadata.Set(key, value)
		env, err := wrap(topic, msg)
		if err != nil {
			t.Fatalf("wrap: %v", err)
		}
		got, back, err := unwrap(env)
		if topics.Validate(topic) != nil {
			if !errors.Is(err, errBadEnvelope) {
				t.Fatalf("envelope for topic %q: %v; want errBadEnvelope", topic, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("unwrap of a wrapped message: %v", err)
		}
		if !utf8.ValidString(uuid + key + value) {
			return // JSON replaces invalid UTF-8; the Publisher refuses such metadata
		}
		if got != topic || back.UUID != uuid || !bytes.Equal(back.Payload, payload) || !maps.Equal(back.Metadata, msg.Metadata) {
			t.Fatalf("round trip of %q/%q: topic %q uuid %q payload %q metadata %q", topic, uuid, got, back.UUID, back.Payload, back.Metadata)
		}
	})
}
