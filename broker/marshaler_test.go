package broker_test

import (
	"testing"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

func TestMarshalerKeysOnlyMessagesWithPartitionKey(t *testing.T) {
	m := broker.NewPartitionKeyMarshaler()
	keyed := message.NewMessage(watermill.NewUUID(), []byte("x"))
	keyed.Metadata.Set(koto.PartitionKeyMetadataKey, "order-7")
	rec, err := m.Marshal("t", keyed)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if key, _ := rec.Key.Encode(); string(key) != "order-7" {
		t.Errorf("record key = %q, want \"order-7\"", key)
	}

	rec, err = m.Marshal("t", message.NewMessage(watermill.NewUUID(), []byte("x")))
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if rec.Key != nil {
		t.Errorf("record key of a message without partition key = %v, want nil (no key)", rec.Key)
	}
}

func TestUnmarshalTakesPartitionKeyFromForeignRecordKey(t *testing.T) {
	msg, err := broker.NewPartitionKeyMarshaler().Unmarshal(&sarama.ConsumerMessage{
		Key:     []byte("customer-3"),
		Value:   []byte("x"),
		Headers: []*sarama.RecordHeader{{Key: []byte(kafka.UUIDHeaderKey), Value: []byte("id-1")}},
	})
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if got := msg.Metadata.Get(koto.PartitionKeyMetadataKey); got != "customer-3" {
		t.Errorf("partition key = %q, want the record key \"customer-3\"", got)
	}
	if msg.UUID != "id-1" {
		t.Errorf("UUID = %q, want \"id-1\"", msg.UUID)
	}
}

// TestSamePartitionKeySamePartition publishes interleaved events of several
// aggregates and checks that each aggregate's events arrive on one
// partition, in order, with the key readable on the consumer side.
func TestSamePartitionKeySamePartition(t *testing.T) {
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 4), "keys")
	pub := kototest.NewPublisher(t, broker.Config{Brokers: brokers})
	keys := []string{"order-1", "order-2", "order-3", "order-4", "order-5", "order-6"}
	const perKey = 5
	for i := range perKey {
		for _, k := range keys {
			publish(t, pub, topic, k, k+"#"+string(rune('0'+i)))
		}
	}

	sub := kototest.NewSubscriber(t, broker.Config{Brokers: brokers, ConsumerGroup: kototest.Group(t, "keys")})
	partitionOf := map[string]int32{}
	seq := map[string]int{}
	for _, m := range kototest.AckN(t, kototest.Subscribe(t, sub, topic), perKey*len(keys)) {
		key := m.Metadata.Get(koto.PartitionKeyMetadataKey)
		pos, _ := koto.PositionFromContext(m.Context())
		if string(pos.Key) != key {
			t.Fatalf("record key %q differs from metadata %q", pos.Key, key)
		}
		p := pos.Partition
		if first, seen := partitionOf[key]; seen && first != p {
			t.Fatalf("key %s arrived on partitions %d and %d", key, first, p)
		}
		partitionOf[key] = p
		if want := key + "#" + string(rune('0'+seq[key])); string(m.Payload) != want {
			t.Fatalf("key %s: got %q, want %q (out of order)", key, m.Payload, want)
		}
		seq[key]++
	}
	if len(partitionOf) != len(keys) {
		t.Fatalf("received keys %v, want all of %v", partitionOf, keys)
	}
}
