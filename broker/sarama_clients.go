package broker

import (
	"github.com/IBM/sarama"
)

// NewSaramaClient connects a sarama client configured as this package's
// subscribers are (identity, protocol version, SASL, TLS, Config.Sarama),
// for tools that need Kafka APIs Watermill does not offer: reading a
// partition from a given offset, listing offsets, committing a group's
// offsets. cfg.ConsumerGroup is not used. Close the client when done;
// [NewProducer] is its counterpart for producing.
func NewSaramaClient(cfg Config) (sarama.Client, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sc, err := cfg.subscriberSarama()
	if err != nil {
		return nil, err
	}
	client, err := sarama.NewClient(cfg.Brokers, sc)
	if err != nil {
		return nil, connectError(cfg, "new Kafka client", err)
	}
	return client, nil
}
