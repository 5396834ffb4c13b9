package koto

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
)
