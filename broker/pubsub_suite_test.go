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
// NewSubscriber against one broker. Kafka keeps the order of a partition
// only, so the suite's order checks are off, and a new subscriber of a
// consumer group starts where the group is, not at the oldest message;
// everything else is on.
func TestUniversalPubSub(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	groups := &suiteGroups{names: map[string]string{}}
	features := tests.Features{ConsumerGroups: true, Persistent: true}
	tests.TestPubSub(t, features,
		func(t *testing.T) (message.Publisher, message.Subscriber) {
			return suitePubSub(t, brokers, groups.of(t))
		},
		func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
			return suitePubSub(t, brokers, groups.of(t)+"-"+group)
		})
}

// suitePubSub is a publisher and a subscriber in group, closed by the
// suite; the group's session times out quickly, since the suite closes
// subscribers and starts new ones in the same group.
func suitePubSub(t *testing.T, brokers []string, group string) (message.Publisher, message.Subscriber) {
	cfg := broker.Config{Brokers: brokers, ConsumerGroup: group, NackResendSleep: 10 * time.Millisecond,
		Sarama: func(sc *sarama.Config) {
			sc.Consumer.Group.Session.Timeout = 6 * time.Second
			sc.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
			sc.Consumer.Group.Rebalance.Timeout = 3 * time.Second
		}}
	pub, err := broker.NewPublisher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := broker.NewSubscriber(cfg)
	if err != nil {
		t.Fatal(err)
	}
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
