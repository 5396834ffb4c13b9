package middleware_test

import (
	"strings"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/middleware"
)

// FuzzIdempotencyKey delivers two messages with any UUIDs, as any producer
// could set the UUID header, through Idempotency. A message with a UUID is
// handled once per distinct UUID, its key being the UUID; one without a
// UUID or a Kafka position is poison whose error says so, and never reaches
// the handler. KeyUUID, which the PostgreSQL store persists, is stable, maps a
// canonical UUID to itself and any other key to a name-based UUID.
func FuzzIdempotencyKey(f *testing.F) {
	f.Add("0190c5a4-9d7e-7000-8000-00000000002a", "0190c5a4-9d7e-7000-8000-00000000002a")
	f.Add("0190C5A4-9D7E-7000-8000-00000000002A", "0190c5a4-9d7e-7000-8000-00000000002a")
	f.Add("", "x")
	f.Add("not-a-uuid", "not-a-uuid ")
	f.Add("\x00", "\xff\xfe")
	f.Add("{0190c5a4-9d7e-7000-8000-00000000002a}", "urn:uuid:0190c5a4-9d7e-7000-8000-00000000002a")
	f.Add(strings.Repeat("u", 100000), "a/b")
	f.Fuzz(func(t *testing.T, first, second string) {
		for _, k := range []string{first, second} {
			ku := idempotency.KeyUUID(k)
			if ku != idempotency.KeyUUID(k) {
				t.Fatalf("KeyUUID(%q) is not stable", k)
			}
			if parsed, err := uuid.Parse(k); err == nil && len(k) == 36 {
				if ku != parsed {
					t.Fatalf("KeyUUID(%q) = %s, want the UUID itself", k, ku)
				}
			} else if ku.Version() != 5 {
				t.Fatalf("KeyUUID(%q) = %s, want a name-based (v5) UUID", k, ku)
			}
		}

		store := idempotency.NewMemoryStore(idempotency.DefaultWindow)
		defer store.Close()
		var handled []string
		mw, err := middleware.Idempotency(store, middleware.IdempotencyConfig{
			Scope: func(*message.Message) string { return "fuzz" },
		})
		if err != nil {
			t.Fatal(err)
		}
		h := mw(func(msg *message.Message) ([]*message.Message, error) {
			handled = append(handled, msg.UUID)
			return nil, nil
		})
		want := 0
		for i, id := range []string{first, second} {
			_, err := h(message.NewMessage(id, nil))
			if id == "" {
				if koto.ClassOf(err) != koto.ClassPoison || !strings.Contains(err.Error(), "no UUID") {
					t.Fatalf("message without UUID or position: err %v, want poison that says it has no UUID", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("message %q: %v", id, err)
			}
			if i == 0 || first != second {
				want++
			}
		}
		if len(handled) != want {
			t.Fatalf("UUIDs %q, %q: handled %q, want %d handled", first, second, handled, want)
		}
	})
}

// FuzzCorrelation runs the Correlation middleware on a message whose
// correlation ID header holds any bytes. The handler sees that ID (a new
// UUID when there is none), a message it returns without an ID gets it,
// one with an ID keeps its own, and the incoming metadata is unchanged.
func FuzzCorrelation(f *testing.F) {
	f.Add("req-42", "")
	f.Add("", "")
	f.Add("", "own")
	f.Add("\xff\x00\n", "\xed\xa0\x80")
	f.Add(strings.Repeat("c", 10000), "x")
	f.Fuzz(func(t *testing.T, incoming, own string) {
		msg := message.NewMessage("m", nil)
		if incoming != "" {
			msg.Metadata.Set(correlation.MetadataKey, incoming)
		}
		var seen string
		produced, err := middleware.Correlation(func(m *message.Message) ([]*message.Message, error) {
			seen = correlation.FromContext(m.Context())
			plain, owned := message.NewMessage("p", nil), message.NewMessage("o", nil)
			if own != "" {
				owned.Metadata.Set(correlation.MetadataKey, own)
			}
			return []*message.Message{plain, owned}, nil
		})(msg)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case incoming != "" && seen != incoming:
			t.Fatalf("handler saw correlation ID %q, want %q", seen, incoming)
		case incoming == "" && uuid.Validate(seen) != nil:
			t.Fatalf("handler saw correlation ID %q, want a new UUID", seen)
		case correlation.FromMessage(produced[0]) != seen:
			t.Fatalf("returned message got ID %q, want %q", correlation.FromMessage(produced[0]), seen)
		case correlation.FromMessage(produced[1]) != map[bool]string{true: own, false: seen}[own != ""]:
			t.Fatalf("returned message with ID %q has %q", own, correlation.FromMessage(produced[1]))
		case correlation.FromMessage(msg) != incoming:
			t.Fatalf("incoming ID changed from %q to %q", incoming, correlation.FromMessage(msg))
		}
	})
}
