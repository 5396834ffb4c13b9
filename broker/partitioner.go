package broker

import (
	"fmt"

	"github.com/IBM/sarama"

	"github.com/koto-dev/watermill-koto/internal/config"
)

// Partitioner says which partition a record with a key goes to: the hash
// of the key of one of the Kafka clients a topic may be shared with, so
// that a key's records land on one partition whoever produces them (see
// Partitioners in the package documentation). A record without a key goes
// to a random partition with each of them.
type Partitioner int

const (
	// PartitionByCRC32 is librdkafka's default partitioner,
	// consistent_random: the CRC-32 (IEEE) of the key, unsigned, modulo
	// the partitions; an empty key counts as none. Confluent.Kafka, and so
	// .NET services on Wolverine, Python's confluent-kafka and kcat, use
	// it unless configured otherwise. The default.
	PartitionByCRC32 Partitioner = iota
	// PartitionByMurmur2 is the default partitioner of Kafka's Java client
	// and of franz-go: murmur2 of the key with the sign bit cleared,
	// modulo the partitions.
	PartitionByMurmur2
	// PartitionByFNV1a is sarama's default partitioner, for topics shared
	// with Go services on sarama's defaults (watermill-kafka's included):
	// the FNV-1a hash of the key as a signed number, modulo the
	// partitions, negated when negative.
	PartitionByFNV1a
)

// String returns the constant's name.
func (p Partitioner) String() string {
	switch p {
	case PartitionByCRC32:
		return "PartitionByCRC32"
	case PartitionByMurmur2:
		return "PartitionByMurmur2"
	case PartitionByFNV1a:
		return "PartitionByFNV1a"
	}
	return fmt.Sprintf("Partitioner(%d)", int(p))
}

func (p Partitioner) validate(problems *config.Problems) {
	switch p {
	case PartitionByCRC32, PartitionByMurmur2, PartitionByFNV1a:
	default:
		problems.Add("Partitioner", "is %v; use PartitionByCRC32 (librdkafka, Confluent.Kafka), PartitionByMurmur2 (Java, franz-go) or PartitionByFNV1a (sarama)", p)
	}
}

// constructor returns sarama's partitioner of p.
func (p Partitioner) constructor() sarama.PartitionerConstructor {
	switch p {
	case PartitionByMurmur2:
		return sarama.NewMurmur2Partitioner
	case PartitionByFNV1a:
		return sarama.NewHashPartitioner
	}
	return newCRC32Partitioner
}

// crc32Partitioner is librdkafka's consistent_random. sarama's
// consistent CRC partitioner hashes an empty key like any other, to
// partition 0; librdkafka sends it to a random partition, as a record
// without a key.
type crc32Partitioner struct {
	sarama.Partitioner // sarama's consistent CRC partitioner
	random             sarama.Partitioner
}

func newCRC32Partitioner(topic string) sarama.Partitioner {
	return crc32Partitioner{
		Partitioner: sarama.NewConsistentCRCHashPartitioner(topic),
		random:      sarama.NewRandomPartitioner(topic),
	}
}

// Partition hashes a non-empty key and picks a random partition otherwise.
func (p crc32Partitioner) Partition(msg *sarama.ProducerMessage, partitions int32) (int32, error) {
	if !hasKey(msg) {
		return p.random.Partition(msg, partitions)
	}
	return p.Partitioner.Partition(msg, partitions)
}

// MessageRequiresConsistency reports whether msg must go to the partition
// its key hashes to, even when that partition has no leader for now: a
// record with a key must; one without may go to any available partition.
func (p crc32Partitioner) MessageRequiresConsistency(msg *sarama.ProducerMessage) bool {
	return hasKey(msg)
}

// hasKey reports whether msg has a key of at least one byte.
func hasKey(msg *sarama.ProducerMessage) bool {
	return msg.Key != nil && msg.Key.Length() > 0
}
