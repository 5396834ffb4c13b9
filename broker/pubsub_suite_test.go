package broker_test

import (
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/internal/kafkatest"
)

// TestUniversalPubSub runs Watermill's universal Pub/Sub suite, which every
// Pub/Sub passes before it counts as production ready, on NewPublisher and
// NewSubscriber against one broker, one message per partition at a time and
// with Config.Concurrency. Kafka keeps the order of a partition only, so
// the suite's order checks run on topics of one partition; a new
// subscriber of a consumer group starts where the group is, not at the
// oldest message; the broker cannot be restarted by a command. Everything
// else is on. The suite's messages have no key, so in the concurrent mode
// they wait for each other per partition: per-key concurrency is tested
// elsewhere (concurrent_order_test.go).
func TestUniversalPubSub(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	for _, mode := range []struct {
		name        string
		concurrency int
	}{{"one at a time", 0}, {"concurrent", 16}} {
		for _, topics := range []struct {
			name       string
			partitions int32
		}{{"partitions", 0}, {"one partition", 1}} {
			t.Run(mode.name+", "+topics.name, func(t *testing.T) {
				groups := &suiteGroups{names: map[string]string{}}
				features := tests.Features{ConsumerGroups: true, Persistent: true, GuaranteedOrder: topics.partitions == 1}
				cfg := suiteConfig(brokers, mode.concurrency, topics.partitions)
				tests.TestPubSub(t, features,
					func(t *testing.T) (message.Publisher, message.Subscriber) {
						return suitePubSub(t, cfg, groups.of(t))
					},
					func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
						return suitePubSub(t, cfg, groups.of(t)+"-"+group)
					})
			})
		}
	}
}

// suiteConfig is the configuration of the suite's pub/subs; the group's
// session times out quickly, since the suite closes subscribers and starts
// new ones in the same group.
func suiteConfig(brokers []string, concurrency int, partitions int32) broker.Config {
	return broker.Config{Brokers: brokers, NackResendSleep: 10 * time.Millisecond,
		Concurrency: concurrency, Provision: broker.ProvisionConfig{Partitions: partitions},
		Sarama: func(sc *sarama.Config) {
			sc.Consumer.Group.Session.Timeout = 6 * time.Second
			sc.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
			sc.Consumer.Group.Rebalance.Timeout = 3 * time.Second
		}}
}

// suitePubSub is a publisher and a subscriber of cfg in group, closed by
// the suite, and closed again when t ends: TestPublishSubscribeInOrder
// leaves its subscribers open (its deferred Close runs at once).
func suitePubSub(t *testing.T, cfg broker.Config, group string) (message.Publisher, message.Subscriber) {
	cfg.ConsumerGroup = group
	pub, err := broker.NewPublisher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := broker.NewSubscriber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return pub, sub
}

// suiteGroups gives each test of the suite a consumer group of its own,
// the same for every pub/sub that test makes, as the suite expects of one
// service: a second subscriber continues where the first stopped.
type suiteGroups struct {
	mu    sync.Mutex
	names map[string]string
}

func (g *suiteGroups) of(t *testing.T) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.names[t.Name()]; !ok {
		g.names[t.Name()] = kafkatest.Group(t, "suite")
	}
	return g.names[t.Name()]
}
