package broker

import (
	"github.com/IBM/sarama"
)

// NewSaramaClient connects a sarama client configured as this package's
// subscribers are (identity, protocol version, SASL, TLS, Config.Sarama),
// for tools that need Kafka APIs Watermill does not offer: reading a
// partition from a given offset, listing offsets, committing a group's
// offsets. cfg.ConsumerGroup is not used. Close the client when done.
func NewSaramaClient(cfg Config) (sarama.Client, error) {
	cfg, sc, err := saramaConfig(cfg, Config.subscriberSarama)
	if err != nil {
		return nil, err
	}
	client, err := sarama.NewClient(cfg.Brokers, sc)
	if err != nil {
		return nil, connectError(cfg, "new Kafka client", err)
	}
	return client, nil
}

// NewSaramaSyncProducer connects a sarama sync producer configured as
// [NewPublisher]'s (acks from all in-sync replicas, idempotent), for tools
// that produce raw records: headers, key and value exactly as given.
// Config.Sarama runs last, as for every client, and may set the
// partitioner. Close the producer when done.
func NewSaramaSyncProducer(cfg Config) (sarama.SyncProducer, error) {
	cfg, sc, err := saramaConfig(cfg, Config.publisherSarama)
	if err != nil {
		return nil, err
	}
	producer, err := sarama.NewSyncProducer(cfg.Brokers, sc)
	if err != nil {
		return nil, connectError(cfg, "new Kafka producer", err)
	}
	return producer, nil
}

// saramaConfig returns cfg with its defaults, validated, and the sarama
// configuration that build makes of it.
func saramaConfig(cfg Config, build func(Config) (*sarama.Config, error)) (Config, *sarama.Config, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return cfg, nil, err
	}
	sc, err := build(cfg)
	return cfg, sc, err
}
