package middleware

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/internal/logattr"
)

// MessageKey is the default idempotency key of a message: its Watermill
// UUID, or "topic/partition/offset" from watermill-kafka's context for a
// record without one (from a non-Watermill producer), which still catches
// Kafka redeliveries. With neither it returns an error, and [Idempotency]
// treats the message as poison.
func MessageKey(msg *message.Message) (string, error) {
	if msg.UUID != "" {
		return msg.UUID, nil
	}
	ctx := msg.Context()
	pos := positionFrom(ctx, message.SubscribeTopicFromCtx(ctx))
	if !pos.kafka || pos.topic == "" {
		return "", errors.New("message has no UUID and no Kafka topic, partition and offset")
	}
	return pos.topic + "/" + pos.partitionString() + "/" + pos.offsetString(), nil
}

// scopedKey is a message's key as both idempotency middlewares compute it:
// the key, the scope it belongs to, and what the store keeps.
type scopedKey struct {
	scope, key string
	stored     string // idempotency.ScopedKey(scope, key)
}

// keyOf computes msg's scoped key with c.Key and c.Scope. A key error makes
// the message poison.
func (c *IdempotencyConfig) keyOf(msg *message.Message) (scopedKey, error) {
	key, err := c.Key(msg)
	if err != nil {
		return scopedKey{}, Poison(fmt.Errorf("middleware: idempotency key: %w", err))
	}
	scope := c.Scope(msg)
	return scopedKey{scope: scope, key: key, stored: idempotency.ScopedKey(scope, key)}, nil
}

// skipped reports msg as a duplicate that is acked without running the
// handler: to [Logging] and to c.OnDuplicate.
func (c *IdempotencyConfig) skipped(msg *message.Message, k scopedKey) {
	reportFrom(msg.Context()).set(OutcomeDuplicate,
		slog.String(logattr.IdempotencyScope, k.scope),
		slog.String(logattr.IdempotencyKey, k.key))
	if c.OnDuplicate != nil {
		c.OnDuplicate(msg, k.scope, k.key)
	}
}
