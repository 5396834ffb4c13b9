package broker

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
)

// Defaults applied to the zero values of [Config].
const (
	// DefaultClientID is the client ID Kafka sees when Config.ClientID is
	// empty.
	DefaultClientID = "watermill-koto"
	// DefaultNackResendSleep is how long a nacked message waits before it
	// is delivered again. It is short on purpose: the partition is blocked
	// meanwhile. Retry middleware with backoff is the place for longer waits.
	DefaultNackResendSleep = 100 * time.Millisecond
	// DefaultReconnectRetrySleep is the pause between attempts to reconnect
	// a subscription whose consumer stopped.
	DefaultReconnectRetrySleep = time.Second
	// DefaultInitialOffset is where a consumer group without a committed
	// offset starts: the oldest offset (see Defaults in the package doc).
	DefaultInitialOffset = sarama.OffsetOldest
)

// defaultKafkaVersion is the Kafka protocol version sarama is configured
// for when Config.KafkaVersion is zero: sarama.V3_6_0_0. sarama asks each
// broker which API versions it supports and uses the highest both sides
// know, so this is a ceiling, not a requirement. It is a function so that
// nobody can change the default for the whole process.
func defaultKafkaVersion() sarama.KafkaVersion { return sarama.V3_6_0_0 }

// Config configures every client of this package: [NewPublisher],
// [NewSubscriber], [ProvisionTopics] and [NewTailReader]. The zero value of
// every field but Brokers (and ConsumerGroup for a subscriber) means its
// default.
type Config struct {
	// Brokers are the bootstrap addresses, host:port. Required.
	// [SplitBrokers] parses a comma-separated list.
	Brokers []string

	// ClientID names this client in the brokers' logs, metrics and quotas.
	// Default: [DefaultClientID].
	ClientID string

	// SASL authenticates every connection. Zero: no SASL.
	SASL SASLConfig

	// TLS, if not nil, encrypts every connection with this configuration
	// (each client gets a clone). Set RootCAs for a private CA; an empty
	// ServerName is taken from the broker address. Nil: plaintext.
	TLS *tls.Config

	// ConsumerGroup is the Kafka consumer group of a subscriber; required by
	// NewSubscriber, unused by the others. topics.ConsumerGroup builds the
	// conventional name.
	ConsumerGroup string

	// InitialOffset is where a consumer group without a committed offset
	// starts: sarama.OffsetOldest or sarama.OffsetNewest. Default:
	// [DefaultInitialOffset].
	InitialOffset int64

	// KafkaVersion is the protocol version sarama is configured for.
	// Default: sarama.V3_6_0_0. sarama negotiates each request down to what
	// the broker supports, so a newer setting still talks to older brokers;
	// the embedded broker handles every version up to sarama.MaxVersion.
	KafkaVersion sarama.KafkaVersion

	// NackResendSleep is how long a nacked message waits before it is
	// delivered again. Default: [DefaultNackResendSleep]; negative turns
	// the wait off.
	NackResendSleep time.Duration

	// ReconnectRetrySleep is the pause between attempts to restart a stopped
	// consumer. Default: [DefaultReconnectRetrySleep]; negative turns the
	// pause off.
	ReconnectRetrySleep time.Duration

	// Concurrency is how many messages a subscriber has in flight at once,
	// over all its partitions. 0 or 1: one message per partition at a time.
	// Above 1, see Concurrent consumption in the package documentation.
	Concurrency int

	// Ordering says which messages of a partition wait for each other when
	// Concurrency is above 1. Default: [OrderByKey].
	Ordering Ordering

	// PartitionBufferRecords bounds the records of a partition that a
	// subscriber holds, fetched and not yet acked. Default:
	// [DefaultPartitionBufferRecords].
	PartitionBufferRecords int

	// PartitionBufferBytes bounds the bytes (key, value and headers,
	// decompressed) of those records. Default: [DefaultPartitionBufferBytes].
	PartitionBufferBytes int

	// DrainTimeout is how long the messages in flight of a partition that
	// is revoked, or of a subscription that ends, get to be acked before
	// they are left to the partition's next owner. It must be shorter than
	// sarama's Consumer.Group.Rebalance.Timeout. Default:
	// [DefaultDrainTimeout].
	DrainTimeout time.Duration

	// Marshaler turns Watermill messages into Kafka records and back.
	// Default: NewPartitionKeyMarshaler().
	Marshaler kafka.MarshalerUnmarshaler

	// Provision configures the topics ProvisionTopics creates.
	Provision ProvisionConfig

	// Sarama, if set, is called with the sarama configuration after this
	// package has applied its defaults, SASL and TLS included, to change
	// anything else (other SASL mechanisms, compression, timeouts). It is
	// called once per client with a fresh configuration. The result must
	// pass sarama's own validation; note that it can also undo the safe
	// defaults described in the package documentation.
	Sarama func(*sarama.Config)
}

// SASLConfig is the SASL authentication of [Config]. Setting User turns
// SASL on. For OAUTHBEARER or GSSAPI, leave it empty and configure sarama's
// Net.SASL in Config.Sarama.
type SASLConfig struct {
	// Mechanism is sarama.SASLTypePlaintext ("PLAIN", the default),
	// sarama.SASLTypeSCRAMSHA256 or sarama.SASLTypeSCRAMSHA512. PLAIN sends
	// the password as it is: use it only over TLS.
	Mechanism sarama.SASLMechanism

	// User is the SASL user name.
	User string

	// Password is the user's password. Required with User.
	Password string
}

func (c *Config) setDefaults() {
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.InitialOffset == 0 {
		c.InitialOffset = DefaultInitialOffset
	}
	if c.KafkaVersion == (sarama.KafkaVersion{}) {
		c.KafkaVersion = defaultKafkaVersion()
	}
	if c.NackResendSleep == 0 {
		c.NackResendSleep = DefaultNackResendSleep
	}
	if c.ReconnectRetrySleep == 0 {
		c.ReconnectRetrySleep = DefaultReconnectRetrySleep
	}
	c.setConsumeDefaults()
	if c.Marshaler == nil {
		c.Marshaler = NewPartitionKeyMarshaler()
	}
	if c.SASL.User != "" && c.SASL.Mechanism == "" {
		c.SASL.Mechanism = sarama.SASLTypePlaintext
	}
	c.Provision.setDefaults()
}

// Validate reports the first field that cannot be used, zero values
// counting as their defaults, sub-configurations included. It checks what
// all clients share; NewSubscriber also requires ConsumerGroup. The
// constructors call it; call it yourself to check a configuration early.
func (c Config) Validate() error {
	if err := validateBrokers(c.Brokers); err != nil {
		return err
	}
	switch c.InitialOffset {
	case 0, sarama.OffsetOldest, sarama.OffsetNewest:
	default:
		return fmt.Errorf("%w: Config.InitialOffset is %d; use sarama.OffsetOldest (%d) or sarama.OffsetNewest (%d), or 0 for the default (%d)",
			ErrInvalidConfig, c.InitialOffset, sarama.OffsetOldest, sarama.OffsetNewest, DefaultInitialOffset)
	}
	if err := c.SASL.Validate(); err != nil {
		return err
	}
	if err := c.validateConsume(); err != nil {
		return err
	}
	return c.Provision.Validate()
}

// Validate reports what stops the SASL configuration from being used.
func (c SASLConfig) Validate() error {
	switch {
	case c.User == "" && (c.Password != "" || c.Mechanism != ""):
		return fmt.Errorf("%w: Config.SASL.User is empty but Password or Mechanism is set; set User to turn SASL on", ErrInvalidConfig)
	case c.User == "":
		return nil
	case c.Password == "":
		return fmt.Errorf("%w: Config.SASL.Password is empty for user %q", ErrInvalidConfig, c.User)
	}
	switch c.Mechanism {
	case "", sarama.SASLTypePlaintext, sarama.SASLTypeSCRAMSHA256, sarama.SASLTypeSCRAMSHA512:
		return nil
	}
	return fmt.Errorf("%w: Config.SASL.Mechanism is %q; use %s, %s or %s, or configure other mechanisms in Config.Sarama",
		ErrInvalidConfig, c.Mechanism, sarama.SASLTypePlaintext, sarama.SASLTypeSCRAMSHA256, sarama.SASLTypeSCRAMSHA512)
}

func (c Config) validateSubscriber() error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.ConsumerGroup == "" {
		return fmt.Errorf("%w: Config.ConsumerGroup is empty; set it to the group this subscriber consumes in, e.g. topics.ConsumerGroup(service, eventType)", ErrNoConsumerGroup)
	}
	return nil
}

// validateBrokers checks that Config.Brokers lists at least one host:port
// address.
func validateBrokers(brokers []string) error {
	if len(brokers) == 0 {
		return fmt.Errorf("%w: Config.Brokers is empty; list at least one host:port, e.g. []string{\"127.0.0.1:9092\"}", ErrNoBrokers)
	}
	for i, addr := range brokers {
		if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" {
			return fmt.Errorf("%w: Config.Brokers[%d] is %q; want host:port, e.g. \"127.0.0.1:9092\"", ErrInvalidConfig, i, addr)
		}
	}
	return nil
}

// SplitBrokers splits a comma-separated list of host:port addresses, such
// as a KAFKA_BROKERS variable or a -brokers flag, into Config.Brokers:
// blanks around an address are trimmed, empty entries dropped. It returns
// nil for a list without addresses.
func SplitBrokers(list string) []string {
	var brokers []string
	for _, addr := range strings.Split(list, ",") {
		if addr = strings.TrimSpace(addr); addr != "" {
			brokers = append(brokers, addr)
		}
	}
	return brokers
}
