package kototest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/topics"
)

// Outcome is what became of one delivery, as the middleware's log line
// says it.
type Outcome string

// The outcomes of a delivery.
const (
	Handled      Outcome = "ok"            // the handler succeeded
	Duplicate    Outcome = "duplicate"     // already processed: acked without the handler
	Parked       Outcome = "parked"        // to be tried again later (middleware, Parking)
	DeadLettered Outcome = "dead-lettered" // on the dead-letter topic
	Nacked       Outcome = "nacked"        // given back for a redelivery
	Probe        Outcome = "probe"         // a probe of another client, acked unhandled
)

// Delivery is one delivery of a message to a handler of the harness's
// router, once it ended.
type Delivery struct {
	// Handler is the router handler: by convention the consumer group.
	Handler string
	// Topic, Partition and Offset are where the message was read from.
	Topic     string
	Partition int32
	Offset    int64
	// Message is the message as the handler got it.
	Message *message.Message
	// Outcome is what became of the delivery.
	Outcome Outcome
	// Retries counts the handler's failed attempts retried in place.
	Retries int
	// Err is the cause of a dead letter.
	Err error
}

// TypeName returns the type name of the delivered message
// (koto.TypeNameMetadataKey).
func (d Delivery) TypeName() string { return d.Message.Metadata.Get(koto.TypeNameMetadataKey) }

// String describes the delivery for a test's failure message.
func (d Delivery) String() string {
	s := fmt.Sprintf("%s %s/%d/%d %s (%s)", d.Handler, d.Topic, d.Partition, d.Offset, d.Message.UUID, d.Outcome)
	if d.Err != nil {
		s += ": " + d.Err.Error()
	}
	return s
}

func (d *delivery) record(acked bool) Delivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := Delivery{Handler: d.handler, Message: d.msg, Outcome: Outcome(d.outcome), Retries: d.retries, Err: d.err}
	switch {
	case !acked:
		out.Outcome = Nacked
	case out.Outcome == "":
		out.Outcome = Handled // a chain without Logging reports nothing
	}
	if d.hasPos {
		out.Topic, out.Partition, out.Offset = d.pos.Topic, d.pos.Partition, d.pos.Offset
	}
	return out
}

// Deliveries returns every delivery that ended so far, in the order they
// ended.
func (h *Harness) Deliveries() []Delivery { return h.track.all() }

// DeadLetters returns the deliveries that ended on a dead-letter topic.
func (h *Harness) DeadLetters() []Delivery {
	var out []Delivery
	for _, d := range h.Deliveries() {
		if d.Outcome == DeadLettered {
			out = append(out, d)
		}
	}
	return out
}

// NoDeadLetters fails the test, listing them, if a message was
// dead-lettered.
func (h *Harness) NoDeadLetters() {
	h.t.Helper()
	if dl := h.DeadLetters(); len(dl) > 0 {
		lines := make([]string, len(dl))
		for i, d := range dl {
			lines[i] = d.String()
		}
		h.t.Errorf("kototest: %d message(s) dead-lettered:\n%s", len(dl), strings.Join(lines, "\n"))
	}
}

// Consumed returns the payloads of type T, decoded from JSON, of the
// deliveries with one of outcomes (all when none is given) of messages
// whose type name is T's (topics.TypeName).
func Consumed[T any](h *Harness, outcomes ...Outcome) []T {
	h.t.Helper()
	name := topics.TypeName(new(T))
	var out []T
	for _, d := range h.Deliveries() {
		if d.TypeName() != name || len(outcomes) > 0 && !slices.Contains(outcomes, d.Outcome) {
			continue
		}
		var v T
		if err := json.Unmarshal(d.Message.Payload, &v); err != nil {
			h.t.Fatalf("kototest: decoding a delivered %s: %v", name, err)
		}
		out = append(out, v)
	}
	return out
}
