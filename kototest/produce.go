package kototest

import (
	"context"
	"testing"

	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/twmb/franz-go/pkg/kgo"

	koto "github.com/koto-dev/watermill-koto"
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
		t.Fatalf("kototest: producer: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("kototest: produce %d records: %v", len(recs), err)
	}
}
