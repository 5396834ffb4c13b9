package broker

import (
	"context"

	"github.com/IBM/sarama"

	koto "github.com/koto-dev/watermill-koto"
)

// withPosition adds to ctx where rec was read from, in the group
// generation that claimed its partition, for koto.PositionFromContext.
func withPosition(ctx context.Context, rec *sarama.ConsumerMessage, generation int32) context.Context {
	return koto.ContextWithPosition(ctx, koto.Position{
		Topic:      rec.Topic,
		Partition:  rec.Partition,
		Offset:     rec.Offset,
		Key:        rec.Key,
		Timestamp:  rec.Timestamp,
		Generation: generation,
	})
}
