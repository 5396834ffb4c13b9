package kafkatest

import (
	"context"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Record returns a record of topic as broker.Publisher writes a message
// with uuid and payload: key, when not empty, as its record key and
// partition key.
func Record(topic, uuid, key string, payload []byte) *kgo.Record {
	rec := &kgo.Record{Topic: topic, Value: payload, Headers: []kgo.RecordHeader{{Key: kafka.UUIDHeaderKey, Value: []byte(uuid)}}}
	if key != "" {
		rec.Key = []byte(key)
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: koto.PartitionKeyMetadataKey, Value: []byte(key)})
	}
	return rec
}

// Produce writes recs with an idempotent franz-go producer, which keeps
// the order of each partition, far faster than one Publish at a time, and
// returns once Kafka acknowledged all of them. opts are added to the
// client's (compression, a manual partitioner).
func Produce(t testing.TB, brokers []string, recs []*kgo.Record, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: producer: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("kafkatest: produce %d records: %v", len(recs), err)
	}
}

// CommittedOffsets returns the offsets group committed on topic, by
// partition, with their metadata.
func CommittedOffsets(t testing.TB, brokers []string, group, topic string) map[int32]kadm.OffsetResponse {
	t.Helper()
	cl := client(t, brokers)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	offsets, err := kadm.NewClient(cl).FetchOffsetsForTopics(ctx, group, topic)
	if err == nil {
		err = offsets.Error()
	}
	if err != nil {
		t.Fatalf("kafkatest: offsets of group %s: %v", group, err)
	}
	out := map[int32]kadm.OffsetResponse{}
	offsets.Each(func(o kadm.OffsetResponse) { out[o.Partition] = o })
	return out
}
