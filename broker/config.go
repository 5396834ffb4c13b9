package broker

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"

	"github.com/koto-dev/watermill-koto/internal/config"
)

// Defaults applied to the zero values of [Config].
const (
	// defaultClientID is the client ID Kafka sees when Config.ClientID is
	// empty.
	defaultClientID = "watermill-koto"
	// defaultNackResendSleep is how long a nacked message waits before it
	// is delivered again. It is short on purpose: the partition is blocked
	// meanwhile. Retry middleware with backoff is the place for longer waits.
	defaultNackResendSleep = 100 * time.Millisecond
	// defaultReconnectRetrySleep is the pause between attempts to reconnect
	// a subscription whose consumer stopped.
	defaultReconnectRetrySleep = time.Second
	// defaultInitialOffset is where a consumer group without a committed
	// offset starts: the oldest offset (see Defaults in the package doc).
	defaultInitialOffset = sarama.OffsetOldest
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
	// Default: "watermill-koto".
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

	// GroupInstanceID, if set, makes each subscription of a subscriber a
	// static member of its consumer group (KIP-345), so that a consumer
	// restarted within the group's session timeout gets its partitions
	// back at once, not after that timeout (see Restarts in the package
	// documentation). It names this instance of the service: unique among
	// the instances, the same across restarts, such as a StatefulSet pod's
	// name. Letters, digits, '.', '_' and '-'. Empty: dynamic membership.
	GroupInstanceID string

	// InitialOffset is where a consumer group without a committed offset
	// starts: sarama.OffsetOldest or sarama.OffsetNewest. Default:
	// sarama.OffsetOldest.
	InitialOffset int64

	// KafkaVersion is the protocol version sarama is configured for.
	// Default: sarama.V3_6_0_0. sarama negotiates each request down to what
	// the broker supports, so a newer setting still talks to older brokers;
	// the embedded broker handles every version up to sarama.MaxVersion.
	KafkaVersion sarama.KafkaVersion

	// NackResendSleep is how long a nacked message waits before it is
	// delivered again. Default: 100ms; negative turns the wait off.
	NackResendSleep time.Duration

	// ReconnectRetrySleep is the pause between attempts to restart a
	// stopped consumer. Default: 1s; negative turns the pause off.
	ReconnectRetrySleep time.Duration

	// Concurrency is how many messages a subscriber has in flight at once,
	// over all its partitions. 0 or 1: one message per partition at a time.
	// Above 1, see Concurrent consumption in the package documentation.
	Concurrency int

	// Ordering says which messages of a partition wait for each other when
	// Concurrency is above 1. Default: [OrderByKey].
	Ordering Ordering

	// PartitionBufferRecords bounds the records of a partition that a
	// subscriber holds, fetched and not yet acked, and, ten times over, how
	// far above its low-water mark it reads. Default: 1000.
	PartitionBufferRecords int

	// PartitionBufferBytes bounds the bytes (key, value and headers,
	// decompressed) of those records. Default: 1 MiB.
	PartitionBufferBytes int

	// DrainTimeout is how long the messages in flight of a partition that
	// is revoked, or of a subscription that ends, get to be acked before
	// they are left to the partition's next owner. It must be shorter than
	// sarama's Consumer.Group.Rebalance.Timeout (60s unless Config.Sarama
	// changes it), or Validate refuses it. Default: 10s, or half the
	// rebalance timeout when that is shorter.
	DrainTimeout time.Duration

	// Batch configures the batches of a batch subscriber
	// ([NewBatchSubscriber]).
	Batch BatchConfig

	// Marshaler turns Watermill messages into Kafka records and back.
	// Default: NewPartitionKeyMarshaler().
	Marshaler kafka.MarshalerUnmarshaler

	// Partitioner picks the partition of a record with a key, as the other
	// producers of the topics do (see Partitioners in the package
	// documentation). Default: [PartitionByCRC32], librdkafka's, the
	// partitioner of Confluent.Kafka's .NET services.
	Partitioner Partitioner

	// Provision configures the topics ProvisionTopics creates.
	Provision ProvisionConfig

	// Logger receives the clients' logs. Nil means slog.Default().
	Logger *slog.Logger

	// Sarama, if set, is called with the sarama configuration after this
	// package has applied its defaults, SASL and TLS included, to change
	// anything else (other SASL mechanisms, compression, timeouts). It is
	// called once per client with a fresh configuration, and by Validate,
	// when DrainTimeout is set, to read the rebalance timeout. The result
	// must pass sarama's own validation; note that it can also undo the
	// safe defaults described in the package documentation.
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
		c.ClientID = defaultClientID
	}
	if c.InitialOffset == 0 {
		c.InitialOffset = defaultInitialOffset
	}
	if c.KafkaVersion == (sarama.KafkaVersion{}) {
		c.KafkaVersion = defaultKafkaVersion()
	}
	if c.NackResendSleep == 0 {
		c.NackResendSleep = defaultNackResendSleep
	}
	if c.ReconnectRetrySleep == 0 {
		c.ReconnectRetrySleep = defaultReconnectRetrySleep
	}
	c.setConsumeDefaults()
	if c.Marshaler == nil {
		c.Marshaler = NewPartitionKeyMarshaler()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.SASL.User != "" && c.SASL.Mechanism == "" {
		c.SASL.Mechanism = sarama.SASLTypePlaintext
	}
	c.Provision.setDefaults()
}

// Validate reports every field that cannot be used, zero values counting
// as their defaults, sub-configurations included, in one error that wraps
// koto.ErrInvalidConfig. It checks what all clients share; NewSubscriber
// also requires ConsumerGroup.
func (c Config) Validate() error {
	p := config.For("broker.Config")
	c.validate(p)
	return p.Err()
}

func (c Config) validate(p *config.Problems) {
	if len(c.Brokers) == 0 {
		p.Add("Brokers", "is empty; list at least one host:port, e.g. []string{\"127.0.0.1:9092\"}")
	}
	for i, addr := range c.Brokers {
		if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" {
			p.Add(fmt.Sprintf("Brokers[%d]", i), "is %q; want host:port, e.g. \"127.0.0.1:9092\"", addr)
		}
	}
	switch c.InitialOffset {
	case 0, sarama.OffsetOldest, sarama.OffsetNewest:
	default:
		p.Add("InitialOffset", "is %d; use sarama.OffsetOldest (%d) or sarama.OffsetNewest (%d), or 0 for the default (%d)",
			c.InitialOffset, sarama.OffsetOldest, sarama.OffsetNewest, defaultInitialOffset)
	}
	c.Partitioner.validate(p)
	c.validateGroupInstanceID(p)
	c.SASL.validate(p)
	c.Provision.validate(p)
	c.validateConsume(p)
}

func (c SASLConfig) validate(p *config.Problems) {
	switch {
	case c.User == "" && (c.Password != "" || c.Mechanism != ""):
		p.Add("SASL.User", "is empty but Password or Mechanism is set; set User to turn SASL on")
	case c.User != "" && c.Password == "":
		p.Add("SASL.Password", "is empty for user %q", c.User)
	}
	switch c.Mechanism {
	case "", sarama.SASLTypePlaintext, sarama.SASLTypeSCRAMSHA256, sarama.SASLTypeSCRAMSHA512:
	default:
		p.Add("SASL.Mechanism", "is %q; use %s, %s or %s, or configure other mechanisms in Config.Sarama",
			c.Mechanism, sarama.SASLTypePlaintext, sarama.SASLTypeSCRAMSHA256, sarama.SASLTypeSCRAMSHA512)
	}
}

func (c Config) validateSubscriber() error {
	p := config.For("broker.Config")
	c.validate(p)
	if c.batching() {
		c.validateBatch(p)
	}
	if c.ConsumerGroup == "" {
		p.Add("ConsumerGroup", "is empty; set it to the group this subscriber consumes in, e.g. topics.ConsumerGroup(service, eventType)")
	}
	return p.Err()
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
