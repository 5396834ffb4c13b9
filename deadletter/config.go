package deadletter

import (
	"errors"
	"fmt"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/topics"
)

// Defaults applied to the zero values of [Config].
const (
	// DefaultReplayGroupSuffix makes the default replay group of a consumer
	// group: "payments.order-placed-consumer" replays in
	// "payments.order-placed-consumer.dlq-replay".
	DefaultReplayGroupSuffix = ".dlq-replay"
	// DefaultBatchSize is how many dead letters a replay sends before it
	// records them in the replay group, and so the most that a crash
	// between the two can send again.
	DefaultBatchSize = 100
)

// ErrInvalidConfig is wrapped by every error that rejects a [Config]; the
// error's text names the field and says what to change.
var ErrInvalidConfig = errors.New("deadletter: invalid configuration")

// Config configures a [Queue]. The zero value of every field but Broker's
// brokers and ConsumerGroup means its default.
type Config struct {
	// Broker connects to Kafka: the same configuration as the services'
	// (brokers, SASL, TLS, the Config.Sarama hook). ConsumerGroup and
	// InitialOffset in it are not used.
	Broker broker.Config

	// ConsumerGroup is the group whose dead letters these are, the handler
	// name of the consumer that failed them. Required.
	ConsumerGroup string

	// Topic is the dead-letter topic. Default:
	// topics.DeadLetter(ConsumerGroup), as the middleware writes it.
	Topic string

	// ReplayGroup is the consumer group in which replays record what they
	// sent; not ConsumerGroup. Default: ConsumerGroup +
	// [DefaultReplayGroupSuffix].
	ReplayGroup string

	// BatchSize is how many dead letters a replay sends in one produce
	// before it records them. Default: [DefaultBatchSize].
	BatchSize int
}

func (c *Config) setDefaults() {
	if c.Topic == "" && c.ConsumerGroup != "" {
		c.Topic = topics.DeadLetter(c.ConsumerGroup)
	}
	if c.ReplayGroup == "" && c.ConsumerGroup != "" {
		c.ReplayGroup = c.ConsumerGroup + DefaultReplayGroupSuffix
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
}

// Validate reports the first field that cannot be used, zero values
// counting as their defaults, Broker included, with an error that wraps
// [ErrInvalidConfig]. [NewQueue] calls it.
func (c Config) Validate() error {
	c.setDefaults()
	if c.ConsumerGroup == "" {
		return invalid("Config.ConsumerGroup is empty; set it to the group whose dead letters to read, e.g. topics.ConsumerGroup(\"payments\", \"order-placed\")")
	}
	if err := topics.Validate(c.Topic); err != nil {
		return invalid("Config.Topic: %w; or leave it empty for topics.DeadLetter(ConsumerGroup)", err)
	}
	if c.ReplayGroup == c.ConsumerGroup {
		return invalid("Config.ReplayGroup is the consumer group %q itself, whose members would make every replay fail; "+
			"leave it empty for ConsumerGroup + %q, or name a group of its own", c.ReplayGroup, DefaultReplayGroupSuffix)
	}
	if c.BatchSize < 0 {
		return invalid("Config.BatchSize is negative (%d); use 0 for the default (%d) or a positive count", c.BatchSize, DefaultBatchSize)
	}
	if err := c.Broker.Validate(); err != nil {
		return invalid("Config.Broker: %w", err)
	}
	return nil
}

// invalid returns a configuration error: ErrInvalidConfig followed by the
// formatted text.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}
