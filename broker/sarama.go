package broker

import (
	"fmt"

	"github.com/IBM/sarama"
)

// baseSarama is what publishers and subscribers share.
func (c Config) baseSarama() *sarama.Config {
	sc := sarama.NewConfig()
	sc.ClientID = c.ClientID
	sc.Version = c.KafkaVersion
	return sc
}

// publisherSarama configures a producer that does not lose or duplicate
// acknowledged writes: acks from all in-sync replicas, and idempotence so
// that retries cannot duplicate or reorder records of a partition. Batching
// is left to sarama's defaults (flush as soon as the previous request
// returns), which batches concurrent publishers without adding latency.
func (c Config) publisherSarama() (*sarama.Config, error) {
	sc := c.baseSarama()
	sc.Producer.Return.Successes = true // required by the sync producer
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Producer.Idempotent = true
	sc.Net.MaxOpenRequests = 1 // required by sarama for idempotence
	sc.Producer.Retry.Max = 10
	return c.finishSarama(sc)
}

// subscriberSarama configures a consumer group that starts new groups at
// InitialOffset and commits marked offsets in the background (see the
// package documentation for when offsets are marked).
func (c Config) subscriberSarama() (*sarama.Config, error) {
	sc := c.baseSarama()
	sc.Consumer.Return.Errors = true // watermill-kafka logs them
	sc.Consumer.Offsets.Initial = c.InitialOffset
	sc.Consumer.Offsets.AutoCommit.Enable = true
	return c.finishSarama(sc)
}

// finishSarama applies the user's hook and sarama's validation.
func (c Config) finishSarama(sc *sarama.Config) (*sarama.Config, error) {
	if c.Sarama != nil {
		c.Sarama(sc)
	}
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("%w: the sarama configuration (after Config.Sarama, if set) is rejected by sarama: %w", ErrInvalidConfig, err)
	}
	return sc, nil
}

// SaramaConsumerConfig returns the sarama configuration NewSubscriber
// builds for cfg, for code that reads Kafka with sarama directly, such as a
// reader without a consumer group. cfg.ConsumerGroup is not required. It
// fails, as NewSubscriber does, when cfg is invalid.
func SaramaConsumerConfig(cfg Config) (*sarama.Config, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg.subscriberSarama()
}
