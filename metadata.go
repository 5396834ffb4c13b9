package koto

import (
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
)

// Metadata keys that more than one package reads or writes. Each becomes a
// Kafka record header of the same name.
const (
	// PartitionKeyMetadataKey holds a message's partition key, which
	// becomes its Kafka record key: messages with the same key go to the
	// same partition and are consumed in the order they were published.
	// Set it to the aggregate ID for the events of one aggregate.
	PartitionKeyMetadataKey = "partition_key"
	// TypeNameMetadataKey holds the type name of the message's payload,
	// as topics.TypeName gives it ("order-placed").
	TypeNameMetadataKey = "name"
	// InvalidRecordMetadataKey is set, to the reason, on a message whose
	// Kafka record does not follow the record mapping that read it (a
	// CloudEvent without ce_id, say). The message keeps the record's value
	// and headers; the dead-letter middleware dead-letters it as poison
	// without calling the handler.
	InvalidRecordMetadataKey = "koto_invalid_record"
	// IdempotencyKeyMetadataKey holds the idempotency key that a record
	// mapping derives for a message whose identity is more than its UUID:
	// a CloudEvent's source and id. middleware.MessageKey prefers it to
	// the UUID. Only the mapping that reads a record sets it; the mappings
	// of package broker neither write it as a header nor read it from one.
	IdempotencyKeyMetadataKey = "koto_idempotency_key"
	// ProbeMetadataKey is set, to the kind of probe, on a message whose
	// record is no message but another client's check that the topic takes
	// writes: "wolverine-ping", the envelope a Wolverine sender writes
	// when it recovers from a failed send, or "wolverine-resources-check",
	// the record of Wolverine's resources check. middleware.DeadLetter
	// acks such a message without calling the handler. As with
	// IdempotencyKeyMetadataKey, only the mapping that reads a record sets
	// it.
	ProbeMetadataKey = "koto_probe"
)

// InvalidRecord returns the error of a message marked with
// [InvalidRecordMetadataKey], which wraps [ErrInvalidRecord] and gives the
// reason, or nil for a message that is not marked.
func InvalidRecord(msg *message.Message) error {
	reason, ok := msg.Metadata[InvalidRecordMetadataKey]
	if !ok {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidRecord, reason)
}
