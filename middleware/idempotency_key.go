package middleware

import (
	"errors"

	"github.com/ThreeDotsLabs/watermill/message"
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
