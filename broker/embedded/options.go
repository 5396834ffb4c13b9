package embedded

import (
	"log/slog"
)

// DefaultPartitions is the number of partitions of a topic that is created
// automatically (on first produce or metadata request) or by [WithTopics].
const DefaultPartitions = 3

// Option configures [Start].
type Option func(*config)

type config struct {
	partitions int
	port       int
	dataDir    string
	topics     []string
	logger     *slog.Logger
}

func newConfig(opts []Option) config {
	c := config{partitions: DefaultPartitions}
	for _, opt := range opts {
		opt(&c)
	}
	return c
}

// WithPartitions sets how many partitions auto-created topics and the topics
// of [WithTopics] get. It must be at least 1. The default is
// [DefaultPartitions].
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
