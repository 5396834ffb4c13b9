package broker

import (
	"context"
	"time"

	"github.com/IBM/sarama"

	"github.com/koto-dev/watermill-koto/internal/config"
)

// baseSarama is what every client shares: identity, protocol version,
// SASL and TLS.
func (c Config) baseSarama() *sarama.Config {
	sc := sarama.NewConfig()
	sc.ClientID = c.ClientID
	sc.Version = c.KafkaVersion
	if c.SASL.User != "" {
		sc.Net.SASL.Enable = true
		sc.Net.SASL.Mechanism = c.SASL.Mechanism
		sc.Net.SASL.User = c.SASL.User
		sc.Net.SASL.Password = c.SASL.Password
		sc.Net.SASL.SCRAMClientGeneratorFunc = scramClientGenerator(c.SASL.Mechanism)
	}
	if c.TLS != nil {
		sc.Net.TLS.Enable = true
		sc.Net.TLS.Config = c.TLS.Clone()
	}
	return sc
}

// publisherSarama configures a producer that does not lose or duplicate
// acknowledged writes: acks from all in-sync replicas, and idempotence so
// that retries cannot duplicate or reorder records of a partition. Keys are
// partitioned by Config.Partitioner. Batching
// is left to sarama's defaults (flush as soon as the previous request
// returns), which batches concurrent publishers without adding latency.
func (c Config) publisherSarama() (*sarama.Config, error) {
	sc := c.baseSarama()
	sc.Producer.Return.Successes = true // the publisher waits for each acknowledgement
	sc.Producer.Return.Errors = true
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Producer.Idempotent = true
	sc.Net.MaxOpenRequests = 1 // required by sarama for idempotence
	sc.Producer.Retry.Max = 10
	sc.Producer.Partitioner = c.Partitioner.constructor()
	return c.finishSarama(sc)
}

// subscriberSarama configures a consumer group that starts new groups at
// InitialOffset and commits marked offsets in the background (see the
// package documentation for when offsets are marked).
func (c Config) subscriberSarama() (*sarama.Config, error) {
	return c.finishSarama(c.subscriberBase())
}

// subscriberBase is the subscriber's configuration before the user's hook.
func (c Config) subscriberBase() *sarama.Config {
	sc := c.baseSarama()
	sc.Consumer.Return.Errors = true // the subscriber logs them
	sc.Consumer.Offsets.Initial = c.InitialOffset
	sc.Consumer.Offsets.AutoCommit.Enable = true
	c.boundFetch(sc)
	if c.batching() {
		// A partition whose fetching resumes waits for the fetch in flight,
		// which the broker holds up to MaxWaitTime when the other
		// partitions have nothing: bounded by the batches' own wait, a hot
		// key's partition is not left idle between its batches.
		sc.Consumer.MaxWaitTime = max(min(sc.Consumer.MaxWaitTime, c.Batch.MaxWait), time.Millisecond)
	}
	return sc
}

// adminSarama configures the cluster admin of ProvisionTopics. Each of
// sarama's blocking steps is bounded by its own timeouts; a deadline of ctx
// that comes sooner lowers them, so that the whole call ends by it, and its
// connections close when ctx ends.
func (c Config) adminSarama(ctx context.Context) (*sarama.Config, error) {
	sc, err := c.finishSarama(c.baseSarama())
	if err != nil {
		return nil, err
	}
	bindToContext(ctx, sc)
	if deadline, ok := ctx.Deadline(); ok {
		left := max(time.Until(deadline), time.Millisecond)
		for _, d := range []*time.Duration{&sc.Net.DialTimeout, &sc.Net.ReadTimeout, &sc.Net.WriteTimeout, &sc.Admin.Timeout} {
			*d = min(*d, left)
		}
		sc.Metadata.Timeout = left
	}
	return sc, nil
}

// finishSarama applies the user's hook and sarama's validation.
func (c Config) finishSarama(sc *sarama.Config) (*sarama.Config, error) {
	c.applySarama(sc)
	if err := sc.Validate(); err != nil {
		return nil, config.Invalid("broker.Config", "Sarama", "leaves a configuration that sarama rejects: %w", err)
	}
	return sc, nil
}

// applySarama calls the user's hook, if any.
func (c Config) applySarama(sc *sarama.Config) {
	if c.Sarama != nil {
		c.Sarama(sc)
	}
}
