package outbox_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// refusingMarshaler is the broker's default Marshaler, but it refuses a
// message whose metadata has "refuse" while refusing is set, as a mapping
// that a redeploy fixes would; refused counts its refusals.
type refusingMarshaler struct {
	kafka.MarshalerUnmarshaler
	refusing *atomic.Bool
	refused  *atomic.Int64
}

func (m refusingMarshaler) Marshal(topic string, msg *message.Message) (*sarama.ProducerMessage, error) {
	if msg.Metadata.Get("refuse") != "" && m.refusing.Load() {
		m.refused.Add(1)
		return nil, errors.New("refusing marshaler: not this message, not yet")
	}
	return m.MarshalerUnmarshaler.Marshal(topic, msg)
}

// TestForwarderKeepsARowItsMarshalerRefuses: a row whose message the
// Marshaler refuses stays in the table, and so does every row behind it,
// while the forwarder retries; once the Marshaler accepts it, the row and
// those behind it arrive once each, in order, and the table empties.
func TestForwarderKeepsARowItsMarshalerRefuses(t *testing.T) {
	e := newEnv(t)
	topic := kototest.Topic(t, "refused")
	r := newReader(t, e.brokers, topic)
	var refusing atomic.Bool
	var refused atomic.Int64
	refusing.Store(true)

	before, after := payloads("before", 5), payloads("after", 5)
	e.publish(topic, msgs(before)...)
	bad := newMsg("refused", "k")
	bad.Metadata.Set("refuse", "yes")
	e.publish(topic, bad)
	e.publish(topic, msgs(after)...)

	cfg := e.forwarderConfig()
	cfg.BatchSize = 3 // before-0..2, then a batch of before-3, before-4 and the refused row
	cfg.Broker.Marshaler = refusingMarshaler{broker.NewPartitionKeyMarshaler(), &refusing, &refused}
	f := e.startForwarder(cfg)

	kototest.WaitFor(t, "the Marshaler to refuse the row", func() bool { return refused.Load() > 0 })
	if got, want := payloadsOf(r.next(3)), strings.Join(before[:3], ","); got != want {
		t.Fatalf("before the refused row's batch, Kafka got %s; want %s", got, want)
	}
	r.none(3 * testPoll)
	if n := e.rows(); n != 8 {
		t.Fatalf("while the Marshaler refuses: %d rows in the table, want 8 (the refused row's batch and those behind it)", n)
	}
	if n := pgtest.QueryInt(t, e.pool, "SELECT count(*) FROM "+e.o.Table()+" WHERE uuid = $1", bad.UUID); n != 1 {
		t.Fatalf("the refused row: %d in the table, want 1", n)
	}
	if !e.logs.logged("the Marshaler refused outbox row") || !e.logs.logged(bad.UUID) {
		t.Fatal("the refusal was not logged with the row's uuid")
	}
	kototest.WaitFor(t, "the forwarder to try the row again", func() bool { return refused.Load() > 1 })

	refusing.Store(false)
	want := strings.Join(append(append(before[3:], "refused"), after...), ",")
	if got := payloadsOf(r.next(8)); got != want {
		t.Fatalf("once the Marshaler accepts, Kafka got %s; want %s", got, want)
	}
	kototest.WaitFor(t, "an empty table", func() bool { return e.rows() == 0 })
	r.none(2 * testPoll)
	if n := f.Forwarded(); n != 11 {
		t.Fatalf("forwarded %d, want 11: the refused batch once, after the first one", n)
	}
}

// msgs makes one message with key k per payload.
func msgs(payloads []string) []*message.Message {
	out := make([]*message.Message, len(payloads))
	for i, p := range payloads {
		out[i] = newMsg(p, "k")
	}
	return out
}
