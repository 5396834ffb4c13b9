package broker

import (
	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
)

// Producer is a sarama.SyncProducer with the producer settings of
// [NewPublisher] (acks=all, idempotent, Config.Sarama applied), together
// with the marshaler NewPublisher would use. It is for code that needs what
// a Watermill publisher cannot give, such as sending a batch of messages
// for many topics in one SendMessages call. Close it when done.
type Producer struct {
	sarama.SyncProducer
	// Marshaler turns a Watermill message into a sarama record:
	// Config.Marshaler, or NewPartitionKeyMarshaler() by default.
	Marshaler kafka.Marshaler
}

// NewProducer returns a Producer for cfg. It connects to the brokers before
// it returns, as NewPublisher does, and fails when cfg is invalid.
func NewProducer(cfg Config) (*Producer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sc, err := cfg.publisherSarama()
	if err != nil {
		return nil, err
	}
	sp, err := sarama.NewSyncProducer(cfg.Brokers, sc)
	if err != nil {
		return nil, connectError(cfg, "new Kafka producer", err)
	}
	return &Producer{SyncProducer: sp, Marshaler: cfg.Marshaler}, nil
}
