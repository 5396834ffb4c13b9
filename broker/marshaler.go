package broker

import (
	"maps"
	"slices"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	koto "github.com/koto-dev/watermill-koto"
)

// NewPartitionKeyMarshaler returns the default marshaler: watermill-kafka's
// partitioning marshaler keyed by koto.PartitionKeyMetadataKey.
//
// Marshal copies the UUID into the _watermill_message_uuid header and every
// metadata entry (the partition key included, koto.IdempotencyKeyMetadataKey
// and koto.ProbeMetadataKey excepted) into a header. A message without a partition key gets no
// record key at all, not an empty one, so sarama spreads such messages
// over the partitions instead of hashing them all to one.
//
// Unmarshal restores the UUID and metadata from the headers. A record from a
// non-Watermill producer that has a key but no partition_key header gets the
// key as its partition_key metadata, so republishing it keeps its partition
// affinity. The raw key is also in the message context:
// koto.PositionFromContext.
func NewPartitionKeyMarshaler() kafka.MarshalerUnmarshaler {
	return partitionKeyMarshaler{
		inner: kafka.NewWithPartitioningMarshaler(partitionKey),
	}
}

func partitionKey(_ string, msg *message.Message) (string, error) {
	return msg.Metadata.Get(koto.PartitionKeyMetadataKey), nil
}

type partitionKeyMarshaler struct {
	inner kafka.MarshalerUnmarshaler
}

func (m partitionKeyMarshaler) Marshal(topic string, msg *message.Message) (*sarama.ProducerMessage, error) {
	rec, err := m.inner.Marshal(topic, msg)
	if err != nil {
		return nil, err
	}
	if msg.Metadata.Get(koto.PartitionKeyMetadataKey) == "" {
		rec.Key = nil
	}
	rec.Headers = slices.DeleteFunc(rec.Headers, func(h sarama.RecordHeader) bool { return readerOnly(string(h.Key)) })
	return rec, nil
}

func (m partitionKeyMarshaler) Unmarshal(rec *sarama.ConsumerMessage) (*message.Message, error) {
	msg, err := m.inner.Unmarshal(rec)
	if err != nil {
		return nil, err
	}
	if len(rec.Key) > 0 && msg.Metadata.Get(koto.PartitionKeyMetadataKey) == "" {
		msg.Metadata.Set(koto.PartitionKeyMetadataKey, string(rec.Key))
	}
	maps.DeleteFunc(msg.Metadata, func(k, _ string) bool { return readerOnly(k) })
	return msg, nil
}
