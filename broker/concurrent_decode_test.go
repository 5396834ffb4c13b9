package broker_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// refusing is the default marshaler, but for the records with value
// "bad", which it refuses the first three times.
type refusing struct {
	refused atomic.Int64
}

func (m *refusing) Marshal(topic string, msg *message.Message) (*sarama.ProducerMessage, error) {
	return broker.NewPartitionKeyMarshaler().Marshal(topic, msg)
}

func (m *refusing) Unmarshal(rec *sarama.ConsumerMessage) (*message.Message, error) {
	if string(rec.Value) == "bad" && m.refused.Add(1) <= 3 {
		return nil, errors.New("cannot decode")
	}
	return broker.NewPartitionKeyMarshaler().Unmarshal(rec)
}

// TestUndecodableRecordHoldsOnlyItsKey: a record the Marshaler refuses is
// tried again until it decodes, and handed out then, not skipped; the
// record of its key after it waits for it, another key's does not.
func TestUndecodableRecordHoldsOnlyItsKey(t *testing.T) {
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "decode")
	kototest.Produce(t, brokers, []*kgo.Record{
		kototest.Record(topic, watermill.NewUUID(), "a", []byte("bad")),
		kototest.Record(topic, watermill.NewUUID(), "a", []byte("a/1")),
		kototest.Record(topic, watermill.NewUUID(), "b", []byte("b/0")),
	})
	m := &refusing{}
	cfg := broker.Config{Brokers: brokers, ConsumerGroup: kototest.Group(t, "decode"), Concurrency: 4,
		Marshaler: m, ReconnectRetrySleep: 50 * time.Millisecond}
	var got []string
	for _, msg := range kototest.AckN(t, kototest.Subscribe(t, kototest.NewSubscriber(t, cfg), topic), 3) {
		got = append(got, string(msg.Payload))
	}
	if got[0] != "b/0" || got[1] != "bad" || got[2] != "a/1" || m.refused.Load() < 4 {
		t.Errorf("handed out %v after %d decodings of the bad record; want b/0 first, then bad (decoded at the 4th try), then a/1", got, m.refused.Load())
	}
}
