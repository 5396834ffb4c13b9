package benchmarks

import (
	"context"
	"fmt"
	"strconv"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fillBatch is how many records fill produces at a time.
const fillBatch = 5000

// E2EKeys is how many partition keys the records of the end-to-end
// topics have, spread by hash over the partitions.
const E2EKeys = 1000

// fill writes n small JSON records to topic, record i with partition key
// i%keys, each with a new UUIDv7 in the Watermill UUID header as this
// project's publishers assign. It uses franz-go, not the publisher under
// test, so that only consumption is measured.
func fill(ctx context.Context, brokers []string, topic string, n, keys int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	for start := 0; start < n; start += fillBatch {
		recs := make([]*kgo.Record, 0, min(fillBatch, n-start))
		for i := start; i < n && i < start+fillBatch; i++ {
			recs = append(recs, record(i, keys))
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("fill %s: %w", topic, err)
		}
	}
	return nil
}

// record returns the i-th record of an end-to-end topic of keys keys.
func record(i, keys int) *kgo.Record {
	key := "key-" + strconv.Itoa(i%keys)
	return &kgo.Record{
		Key:   []byte(key),
		Value: payload(int64(i)),
		Headers: []kgo.RecordHeader{
			{Key: kafka.UUIDHeaderKey, Value: []byte(uuid.Must(uuid.NewV7()).String())},
			{Key: koto.PartitionKeyMetadataKey, Value: []byte(key)},
		},
	}
}
