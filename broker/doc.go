// Package broker wires Watermill to Kafka (watermill-kafka on IBM/sarama)
// with defaults that do not lose or skip messages, provisions topics and
// reads topics from their end.
//
// # Defaults
//
// One [Config] feeds every client: [NewPublisher], [NewSubscriber],
// [ProvisionTopics] and [NewTailReader].
//
//   - A new consumer group starts at the oldest offset, so it also receives
//     what was published before it first joined (sarama would start at the
//     newest and skip those silently).
//   - The producer waits for all in-sync replicas (acks=all) and is
//     idempotent: its retries cannot duplicate or reorder a partition.
//   - Messages whose metadata has [PartitionKeyMetadataKey] get that value as
//     their Kafka record key, so one aggregate's events land on one partition
//     and stay in order. Messages without it have no key and spread over the
//     partitions.
//   - sarama is set to Kafka protocol version 3.6 and negotiates each request
//     down to what the broker supports.
//
// # Security
//
// Config.SASL (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) and Config.TLS apply
// to every connection of every client, topic provisioning included; other
// mechanisms go through Config.Sarama, which every client applies as well.
// Credentials that Kafka rejects fail the call that connects with an error
// wrapping [ErrAuthenticationFailed], after sarama's few metadata retries
// (about a second), never in an endless retry.
//
// # When offsets are committed
//
// watermill-kafka hands a subscriber one message per partition at a time and
// waits for its Ack or Nack before the next. Only an Ack marks the record's
// offset (sarama's MarkMessage); a Nack sends the same message again after
// [Config.NackResendSleep] and marks nothing. sarama commits marked offsets in
// the background every second, when partitions are rebalanced, and when the
// subscriber closes. The committed offset therefore never passes a message
// that was not acked. What was acked in the last second before a crash, or
// acked while the subscriber was closing, is delivered again: delivery is
// at-least-once, and the idempotency middleware absorbs the repeats.
//
// # Topics
//
// [ProvisionTopics] creates missing topics with Config.Provision's settings
// and leaves existing ones alone; it is safe to call at every start of every
// instance.
package broker
