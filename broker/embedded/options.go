package embedded

import (
	"crypto/tls"
	"log/slog"

	"github.com/koto-dev/watermill-koto/broker"
)

// SASL mechanisms of [WithSASLUser], named as Kafka names them.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// Option configures [Start].
type Option func(*config)

type config struct {
	partitions int
	port       int
	dataDir    string
	topics     []string
	logger     *slog.Logger
	users      []saslUser
	tls        *tls.Config
}

type saslUser struct{ mechanism, name, password string }

func newConfig(opts []Option) config {
	var c config
	for _, opt := range opts {
		opt(&c)
	}
	c.setDefaults()
	return c
}

func (c *config) setDefaults() {
	if c.partitions == 0 {
		c.partitions = broker.DefaultPartitions
	}
}

// WithPartitions sets how many partitions auto-created topics and the topics
// of [WithTopics] get. The default, and 0, is broker.DefaultPartitions, as
// for topics that broker.ProvisionTopics creates.
func WithPartitions(n int) Option {
	return func(c *config) { c.partitions = n }
}

// WithPort makes the broker listen on 127.0.0.1:port. The default, and port
// 0, pick a free port; read it from [Broker.Addrs].
func WithPort(port int) Option {
	return func(c *config) { c.port = port }
}

// WithDataDir keeps the broker's state in dir: topics, records and committed
// consumer-group offsets. A broker started later on the same dir (on the same
// or another port) serves them again. The directory is created if needed.
// Without this option the state lives in memory and is gone after Close.
//
// Only one broker may use a directory at a time; nothing locks it. Close
// saves the complete state. Records are written without fsync, as Kafka does
// by default, so a machine crash can lose the latest writes.
func WithDataDir(dir string) Option {
	return func(c *config) { c.dataDir = dir }
}

// WithTopics creates the named topics, with the partition count of
// [WithPartitions], before Start returns. Topics that already exist (for
// example, restored from [WithDataDir]) are left as they are. The option can
// be given several times; the names add up.
func WithTopics(names ...string) Option {
	return func(c *config) { c.topics = append(c.topics, names...) }
}

// WithLogger sends the broker's own log lines to logger. kfake logs every
// request at its info level, so those lines go to slog's debug level; broker
// warnings and errors keep their level. By default nothing is logged.
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) { c.logger = logger }
}

// WithSASLUser adds a user that clients authenticate as with mechanism:
// [SASLPlain], [SASLScramSHA256] or [SASLScramSHA512]. Once the broker has a
// user, every connection must authenticate (SASL handshake v1, as sarama,
// franz-go and librdkafka send it) before anything else. The option can be given
// several times, for several users or mechanisms.
func WithSASLUser(mechanism, user, password string) Option {
	return func(c *config) { c.users = append(c.users, saslUser{mechanism, user, password}) }
}

// WithTLS makes the broker accept only TLS connections, with cfg, which
// needs a server certificate (Certificates or GetCertificate). Set
// cfg.ClientAuth and ClientCAs to require client certificates too.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) { c.tls = cfg }
}
