package deadletter

import (
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/internal/config"
	"github.com/koto-dev/watermill-koto/topics"
)

// Defaults applied to the zero values of [Config].
const (
	// defaultReplayGroupSuffix makes the default replay group of a consumer
	// group: "payments.order-placed-consumer" replays in
	// "payments.order-placed-consumer.dlq-replay".
	defaultReplayGroupSuffix = ".dlq-replay"
	// defaultBatchSize is how many dead letters a replay sends before it
	// records them in the replay group, and so the most that a crash
	// between the two can send again.
	defaultBatchSize = 100
)

// Config configures a [Queue]. The zero value of every field but Broker's
// brokers and ConsumerGroup means its default.
type Config struct {
	// Broker connects to Kafka: the same configuration as the services'
	// (brokers, SASL, TLS, the Config.Sarama hook). ConsumerGroup and
	// InitialOffset in it are not used.
	Broker broker.Config

	// Mapping is the record mapping the dead letters are read in. Default:
	// each record's own, as broker.DetectMapping finds it from its
	// headers, so that the dead letters of consumers on any mapping read
	// alike. Broker.Marshaler, if set, reads the records of its mapping,
	// with its type names (broker.NewMappingReader).
	Mapping broker.Mapping

	// ConsumerGroup is the group whose dead letters these are, the handler
	// name of the consumer that failed them. Required.
	ConsumerGroup string

	// Topic is the dead-letter topic. Default:
	// topics.DeadLetter(ConsumerGroup), as the middleware writes it.
	Topic string

	// ReplayGroup is the consumer group in which replays record what they
	// sent; not ConsumerGroup. Default: ConsumerGroup +
	// ".dlq-replay".
	ReplayGroup string

	// BatchSize is how many dead letters a replay sends in one produce
	// before it records them. Default: 100.
	BatchSize int
}

func (c *Config) setDefaults() {
	if c.Topic == "" && c.ConsumerGroup != "" {
		c.Topic = topics.DeadLetter(c.ConsumerGroup)
	}
	if c.ReplayGroup == "" && c.ConsumerGroup != "" {
		c.ReplayGroup = c.ConsumerGroup + defaultReplayGroupSuffix
	}
	if c.BatchSize == 0 {
		c.BatchSize = defaultBatchSize
	}
}

// Validate reports every field that cannot be used, zero values counting
// as their defaults, Broker included, in one error that wraps
// koto.ErrInvalidConfig. [NewQueue] calls it.
func (c Config) Validate() error {
	c.setDefaults()
	p := config.For("deadletter.Config")
	if c.ConsumerGroup == "" {
		p.Add("ConsumerGroup", "is empty; set it to the group whose dead letters to read, e.g. topics.ConsumerGroup(\"payments\", \"order-placed\")")
	}
	if c.Topic != "" {
		if err := topics.Validate(c.Topic); err != nil {
			p.Add("Topic", "%w; or leave it empty for topics.DeadLetter(ConsumerGroup)", err)
		}
	}
	if c.ReplayGroup != "" && c.ReplayGroup == c.ConsumerGroup {
		p.Add("ReplayGroup", "is the consumer group %q itself, whose members would make every replay fail; "+
			"leave it empty for ConsumerGroup + %q, or name a group of its own", c.ReplayGroup, defaultReplayGroupSuffix)
	}
	if c.BatchSize < 0 {
		p.Add("BatchSize", "is negative (%d); use 0 for the default (%d) or a positive count", c.BatchSize, defaultBatchSize)
	}
	p.Nest("Mapping", c.Mapping.Validate())
	p.Nest("Broker", c.Broker.Validate())
	return p.Err()
}
