package broker

import (
	"context"

	"github.com/IBM/sarama"

	koto "github.com/koto-dev/watermill-koto"
)

// withPosition adds to ctx where rec was read from, in the group
// generation that claimed its partition, for koto.PositionFromContext, and
// rec as it was, for koto.ConsumedRecordFromContext.
func withPosition(ctx context.Context, rec *sarama.ConsumerMessage, generation int32) context.Context {
	ctx = koto.ContextWithPosition(ctx, koto.Position{
		Topic:      rec.Topic,
		Partition:  rec.Partition,
		Offset:     rec.Offset,
		Key:        rec.Key,
		Timestamp:  rec.Timestamp,
		Generation: generation,
	})
	return koto.ContextWithConsumedRecord(ctx, consumedRecord(rec))
}

// consumedRecord is rec as the vocabulary holds it; it shares rec's bytes.
func consumedRecord(rec *sarama.ConsumerMessage) koto.Record {
	headers := make([]koto.Header, 0, len(rec.Headers))
	for _, h := range rec.Headers {
		if h != nil {
			headers = append(headers, koto.Header{Key: h.Key, Value: h.Value})
		}
	}
	return koto.Record{Key: rec.Key, Headers: headers, Value: rec.Value}
}
