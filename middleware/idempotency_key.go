package middleware

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/internal/logattr"
)

// MessageKey is the default idempotency key of a message: the key its
// record mapping derived (koto.IdempotencyKeyMetadataKey: a CloudEvent's
// source and id), or else its Watermill UUID, or, for a record without
// one (from a non-Watermill producer), "topic/partition/offset/timestamp"
// from its koto.Position, the record's timestamp in Unix milliseconds. The
// position catches Kafka redeliveries; the timestamp keeps apart a record
// of a topic that was deleted and created again within the window, whose
// offsets start at 0 again. With neither UUID nor position it returns an
// error, and [Idempotency] treats the message as poison.
func MessageKey(msg *message.Message) (string, error) {
	if key := msg.Metadata.Get(koto.IdempotencyKeyMetadataKey); key != "" {
		return key, nil
	}
	if msg.UUID != "" {
		return msg.UUID, nil
	}
	ctx := msg.Context()
	pos := positionFrom(ctx, message.SubscribeTopicFromCtx(ctx))
	if !pos.kafka || pos.Topic == "" {
		return "", errors.New("message has no UUID and no Kafka topic, partition and offset")
	}
	key := pos.Topic + "/" + pos.partitionString() + "/" + pos.offsetString()
	if !pos.Timestamp.IsZero() {
		key += "/" + strconv.FormatInt(pos.Timestamp.UnixMilli(), 10)
	}
	return key, nil
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
		return scopedKey{}, koto.Poison(fmt.Errorf("middleware: idempotency key: %w", err))
	}
	scope := c.Scope(msg)
	return scopedKey{scope: scope, key: key, stored: idempotency.ScopedKey(scope, key)}, nil
}

// skipped reports msg as a duplicate that is acked without running the
// handler: to [Logging] and to c.OnDuplicate.
func (c *IdempotencyConfig) skipped(msg *message.Message, k scopedKey) {
	reportFrom(msg.Context()).set(outcomeDuplicate,
		slog.String(logattr.IdempotencyScope, k.scope),
		slog.String(logattr.IdempotencyKey, k.key))
	if c.OnDuplicate != nil {
		c.OnDuplicate(msg, k.scope, k.key)
	}
}
