package kototest

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/broker"
)

// NewPublisher returns broker.NewPublisher(cfg), closed when t finishes.
func NewPublisher(t testing.TB, cfg broker.Config) *broker.Publisher {
	t.Helper()
	pub, err := broker.NewPublisher(cfg)
	if err != nil {
		t.Fatalf("kototest: NewPublisher: %v", err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// NewSubscriber returns broker.NewSubscriber(cfg), closed when t finishes.
// cfg.ConsumerGroup is required; [Group] makes a fresh one.
func NewSubscriber(t testing.TB, cfg broker.Config) *broker.Subscriber {
	t.Helper()
	sub, err := broker.NewSubscriber(cfg)
	if err != nil {
		t.Fatalf("kototest: NewSubscriber: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// Provision creates the topics with cfg (cfg.Provision's partitions), as
// an application does at start, within [DefaultTimeout].
func Provision(t testing.TB, cfg broker.Config, names ...string) {
	t.Helper()
	if err := broker.ProvisionTopics(Context(t), cfg, names...); err != nil {
		t.Fatalf("kototest: provision %v: %v", names, err)
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
// finishes, for what a test looks at behind its clients' backs.
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
		t.Fatalf("kototest: client: %v", err)
	}
	return cl
}

// TopicExists reports whether topic exists on brokers, asking with a
// metadata request that never creates it, whatever the cluster's
// auto-creation setting.
func TopicExists(t testing.TB, brokers []string, topic string) bool {
	t.Helper()
	cl := client(t, brokers)
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(Context(t), cl)
	if err != nil {
		t.Fatalf("kototest: metadata of %s: %v", topic, err)
	}
	for _, rt := range resp.Topics {
		if rt.Topic != nil && *rt.Topic == topic {
			if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
				if errors.Is(err, kerr.UnknownTopicOrPartition) {
					return false
				}
				t.Fatalf("kototest: metadata of %s: %v", topic, err)
			}
			return true
		}
	}
	return false
}
