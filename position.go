package koto

import (
	"context"
	"time"
)

// Position is where a subscriber read a message from. The broker's
// subscriber puts it in every message's context; the middleware reads it
// for the dead letter's original position and for the key of a message
// without a UUID.
type Position struct {
	Topic     string
	Partition int32
	Offset    int64
	// Key is the Kafka record key; nil when the record had none.
	Key []byte
	// Timestamp is the record's timestamp.
	Timestamp time.Time
	// Generation is the consumer group generation in which the
	// subscriber claimed the partition. It changes at every rebalance, so
	// that what keeps state per partition knows when another consumer may
	// have owned it meanwhile; 0 outside a consumer group.
	Generation int32
}

type positionKey struct{}

// ContextWithPosition returns ctx carrying p.
func ContextWithPosition(ctx context.Context, p Position) context.Context {
	return context.WithValue(ctx, positionKey{}, p)
}

// PositionFromContext returns the position in ctx, and whether there is
// one.
func PositionFromContext(ctx context.Context) (Position, bool) {
	p, ok := ctx.Value(positionKey{}).(Position)
	return p, ok
}
