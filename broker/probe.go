package broker

import (
	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
)

// The probes of other clients that the Wolverine and CloudEvents mappings
// mark with koto.ProbeMetadataKey.
const (
	// probeWolverinePing is the envelope of Wolverine's Envelope.ForPing,
	// which a sender writes to find out whether it can send again: its
	// message-type header is "wolverine-ping" (its content-type
	// "wolverine/ping", its body four bytes). Wolverine's listeners drop
	// it by that header alone.
	probeWolverinePing = "wolverine-ping"
	// probeWolverineResourcesCheck is the record that Wolverine's
	// resources check writes to each Kafka topic it sends to: key "ping",
	// value "ping", no header.
	probeWolverineResourcesCheck = "wolverine-resources-check"
)

// wolverinePingRecord is the key and the value of the record of
// Wolverine's resources check.
const wolverinePingRecord = "ping"

// probeOf returns the kind of probe rec is, whose headers md holds, or ""
// for a record that is no probe.
func probeOf(rec *sarama.ConsumerMessage, md message.Metadata) string {
	switch {
	case md[wolverineMessageTypeHeader] == probeWolverinePing:
		return probeWolverinePing
	case len(rec.Headers) == 0 && string(rec.Key) == wolverinePingRecord && string(rec.Value) == wolverinePingRecord:
		return probeWolverineResourcesCheck
	}
	return ""
}

// readerOnly reports whether a metadata key is set by the mapping that
// reads a record, never taken from a header nor written as one: a producer
// cannot choose a message's idempotency key, nor have it skipped as a
// probe.
func readerOnly(key string) bool {
	return key == koto.IdempotencyKeyMetadataKey || key == koto.ProbeMetadataKey
}
