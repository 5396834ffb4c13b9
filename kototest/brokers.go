package kototest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
)

// EnvBrokers is the environment variable that points the helpers at an
// existing cluster, e.g. "127.0.0.1:9092" or "k1:9092,k2:9092".
const EnvBrokers = "KAFKA_BROKERS"

// startTimeout bounds starting an embedded broker.
const startTimeout = 30 * time.Second

// Brokers returns the bootstrap addresses for t: those in KAFKA_BROKERS if
// set, otherwise those of an embedded broker (3 partitions per auto-created
// topic) that is closed when t finishes.
func Brokers(t testing.TB) []string {
	t.Helper()
	if addrs := FromEnv(); len(addrs) > 0 {
		return addrs
	}
	return Embedded(t).Addrs()
}

// Embedded starts an embedded broker with opts for t alone, whatever
// KAFKA_BROKERS says, and closes it when t finishes. Tests that inject
// faults through Broker.Cluster or restart the broker need it.
func Embedded(t testing.TB, opts ...embedded.Option) *embedded.Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	b, err := embedded.Start(ctx, opts...)
	if err != nil {
		t.Fatalf("kototest: start embedded broker: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// FromEnv returns the addresses listed in KAFKA_BROKERS, or nil when it is
// unset or empty: the tests run on a cluster they share.
func FromEnv() []string {
	return broker.SplitBrokers(os.Getenv(EnvBrokers))
}
