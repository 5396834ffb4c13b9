package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Broker is a running in-process Kafka-protocol broker. Create it with
// [Start] and stop it with [Broker.Close].
type Broker struct {
	cfg config // cfg.port is the bound port once started

	mu      sync.Mutex
	cluster *kfake.Cluster // nil while stopped
	addrs   []string
}

// Start starts a single-node broker on 127.0.0.1 and returns once it accepts
// connections and the topics of [WithTopics] exist. Topics are created
// automatically when a client first produces to or asks for them.
//
// ctx bounds the start only: cancelling it later does not stop the broker,
// [Broker.Close] does. An option value it cannot use fails the start, before
// anything listens, with an error that wraps koto.ErrInvalidConfig and names
// each option it refuses.
func Start(ctx context.Context, opts ...Option) (*Broker, error) {
	cfg := newConfig(opts)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// start runs a cluster with b's options on b's port; b.mu is held.
func (b *Broker) start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("embedded: start: %w", err)
	}
	cluster, err := kfake.NewCluster(b.cfg.kfakeOptions()...)
	if err != nil {
		return fmt.Errorf("embedded: start kfake cluster: %w", err)
	}
	addrs := cluster.ListenAddrs()
	if err := createTopics(cluster, int32(b.cfg.partitions), b.cfg.topics); err != nil {
		cluster.Close()
		return err
	}
	if _, port, err := net.SplitHostPort(addrs[0]); err == nil {
		b.cfg.port, _ = strconv.Atoi(port)
	}
	b.cluster, b.addrs = cluster, addrs
	return nil
}

func (c config) kfakeOptions() []kfake.Opt {
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(c.partitions),
	}
	if c.port != 0 {
		opts = append(opts, kfake.Ports(c.port))
	}
	if c.dataDir != "" {
		opts = append(opts, kfake.DataDir(c.dataDir))
	}
	if c.logger != nil {
		opts = append(opts, kfake.WithLogger(slogAdapter{logger: c.logger}))
	}
	for _, u := range c.users {
		opts = append(opts, kfake.Superuser(u.mechanism, u.name, u.password))
	}
	if len(c.users) > 0 {
		opts = append(opts, kfake.EnableSASL())
	}
	if c.tls != nil || len(c.users) > 0 {
		opts = append(opts, kfake.ListenFn(c.listen))
	}
	return opts
}

// createTopics creates the topics of WithTopics. kfake seeds topics only
// into an empty data directory, so a broker restarted on existing data
// would otherwise miss topics added to WithTopics later.
func createTopics(cluster *kfake.Cluster, partitions int32, names []string) error {
	for _, name := range names {
		if err := cluster.CreateTopic(name, partitions, nil); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("embedded: create topic %q: %w", name, err)
		}
	}
	return nil
}

// Addrs returns the host:port addresses that clients use as their bootstrap
// brokers, such as []string{"127.0.0.1:40123"}. They stay the same across
// [Broker.Restart].
func (b *Broker) Addrs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.addrs...)
}

// Cluster returns the kfake cluster behind the broker, for fault injection
// in tests: kfake's Cluster.Fault fails chosen requests (say, every Produce
// to a topic until removed), and ControlKey with SleepControl, KeepControl
// and DropControl delays or answers requests of one kind, such as Fetch or
// OffsetCommit. Faults and controls end with the cluster, at Close or
// Restart. It returns nil while the broker is closed. Anything else done to
// the cluster is outside what this package supports.
func (b *Broker) Cluster() *kfake.Cluster {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cluster
}

// Restart stops the broker if it runs, as Close does, and starts it again
// with the same options on the same address: clients reconnect to the same
// Addrs. With [WithDataDir] it comes back with its topics, records and
// committed offsets; without, it comes back empty. To keep the broker down
// for a while, Close it first and Restart it later. ctx bounds the start.
func (b *Broker) Restart(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stop()
	return b.start(ctx)
}

// Close stops the broker: it stops accepting connections, drops the open
// ones and, with [WithDataDir], writes its state to disk. Calling Close more
// than once is safe; later calls do nothing until a [Broker.Restart]. It
// always returns nil today; the error is there so that callers need not
// change if writing state can fail visibly one day.
func (b *Broker) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stop()
	return nil
}

// stop closes the cluster, if any; b.mu is held.
func (b *Broker) stop() {
	if b.cluster != nil {
		b.cluster.Close()
		b.cluster = nil
	}
}
