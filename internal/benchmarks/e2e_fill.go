package benchmarks

import (
	"context"
	"fmt"
	"strconv"

	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fillBatch is how many records fill produces at a time.
const fillBatch = 5000

// fill writes n small JSON records to topic, round robin over its
// partitions, each with a new UUIDv7 in the Watermill UUID header as this
// project's publishers assign. It uses franz-go, not the publisher under
// test, so that only consumption is measured.
func fill(ctx context.Context, brokers []string, topic string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	for start := 0; start < n; start += fillBatch {
		recs := make([]*kgo.Record, 0, min(fillBatch, n-start))
		for i := start; i < n && i < start+fillBatch; i++ {
			recs = append(recs, &kgo.Record{
				Value:   []byte(`{"order_id":` + strconv.Itoa(i) + `,"amount":10}`),
				Headers: []kgo.RecordHeader{{Key: kafka.UUIDHeaderKey, Value: []byte(uuid.Must(uuid.NewV7()).String())}},
			})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("fill %s: %w", topic, err)
		}
	}
	return nil
}
