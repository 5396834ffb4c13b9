package kafkatest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
)

// NewPublisher returns broker.NewPublisher(cfg), closed when t finishes.
func NewPublisher(t testing.TB, cfg broker.Config) *broker.Publisher {
	t.Helper()
	pub, err := broker.NewPublisher(cfg, nil)
	if err != nil {
		t.Fatalf("kafkatest: NewPublisher: %v", err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// NewSubscriber returns broker.NewSubscriber(cfg), closed when t finishes.
// cfg.ConsumerGroup is required; [Group] makes a fresh one.
func NewSubscriber(t testing.TB, cfg broker.Config) *broker.Subscriber {
	t.Helper()
	sub, err := broker.NewSubscriber(cfg, nil)
	if err != nil {
		t.Fatalf("kafkatest: NewSubscriber: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// Provision creates the topics with cfg (cfg.Provision's partitions), as
// an application does at start, within [Timeout].
func Provision(t testing.TB, cfg broker.Config, names ...string) {
	t.Helper()
	if err := broker.ProvisionTopics(Context(t), cfg, names...); err != nil {
		t.Fatalf("kafkatest: provision %v: %v", names, err)
	}
}

// NewTopic provisions a new [Topic] that starts with prefix, with cfg, and
// returns its name.
func NewTopic(t testing.TB, cfg broker.Config, prefix string) string {
	t.Helper()
	name := Topic(t, prefix)
	Provision(t, cfg, name)
	return name
}

// Admin returns a franz-go admin client on brokers, closed when t
// finishes, for what the tests look at behind the project's back.
func Admin(t testing.TB, brokers []string) *kadm.Client {
	t.Helper()
	cl := client(t, brokers)
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// client returns a franz-go client on brokers, for the caller to close.
func client(t testing.TB, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatalf("kafkatest: client: %v", err)
	}
	return cl
}
