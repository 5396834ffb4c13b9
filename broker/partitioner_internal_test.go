package broker

import (
	"testing"

	"github.com/IBM/sarama"
)

// TestCRC32PartitionerSpreadsEmptyKeys: librdkafka's consistent_random
// sends a record with an empty key, as one without a key, to a random
// partition, where sarama's consistent CRC partitioner hashes it to
// partition 0 every time.
func TestCRC32PartitionerSpreadsEmptyKeys(t *testing.T) {
	p := newCRC32Partitioner("t").(sarama.DynamicConsistencyPartitioner)
	for _, key := range []sarama.Encoder{nil, sarama.StringEncoder(""), sarama.ByteEncoder{}} {
		msg := &sarama.ProducerMessage{Topic: "t", Key: key}
		if p.MessageRequiresConsistency(msg) {
			t.Errorf("key %#v requires consistency; a record without a key goes to any partition", key)
		}
		seen := map[int32]bool{}
		for range 200 {
			n, err := p.Partition(msg, 12)
			if err != nil {
				t.Fatalf("Partition: %v", err)
			}
			seen[n] = true
		}
		if len(seen) < 2 {
			t.Errorf("key %#v went to partitions %v in 200 records; want random partitions", key, seen)
		}
	}
	keyed := &sarama.ProducerMessage{Topic: "t", Key: sarama.StringEncoder("order-1")}
	if !p.MessageRequiresConsistency(keyed) {
		t.Error("a record with a key does not require consistency; it must go to its key's partition")
	}
}
