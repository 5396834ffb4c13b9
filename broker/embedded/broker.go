package embedded

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Broker is a running in-process Kafka-protocol broker. Create it with
// [Start] and stop it with [Broker.Close].
type Broker struct {
	cluster *kfake.Cluster
	addrs   []string

	closeOnce sync.Once
}

// Start starts a single-node broker on 127.0.0.1 and returns once it accepts
// connections and the topics of [WithTopics] exist. Topics are created
// automatically when a client first produces to or asks for them.
//
// ctx bounds the start only: cancelling it later does not stop the broker,
// [Broker.Close] does.
func Start(ctx context.Context, opts ...Option) (*Broker, error) {
	cfg := newConfig(opts)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("embedded: start: %w", err)
	}
	cluster, err := kfake.NewCluster(cfg.kfakeOptions()...)
	if err != nil {
		return nil, fmt.Errorf("embedded: start kfake cluster: %w", err)
	}
	b := &Broker{cluster: cluster, addrs: cluster.ListenAddrs()}
	if err := createTopics(ctx, b.addrs, int32(cfg.partitions), cfg.topics); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
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
	return opts
}

// Addrs returns the host:port addresses that clients use as their bootstrap
// brokers, such as []string{"127.0.0.1:40123"}.
func (b *Broker) Addrs() []string {
	return append([]string(nil), b.addrs...)
}

// Close stops the broker: it stops accepting connections, drops the open
// ones and, with [WithDataDir], writes its state to disk. Calling Close more
// than once is safe; later calls do nothing. It always returns nil today; the
// error is there so that callers need not change if writing state can fail
// visibly one day.
func (b *Broker) Close() error {
	b.closeOnce.Do(b.cluster.Close)
	return nil
}
