package outbox_test

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

// TestUniversalPubSubThroughTheOutbox runs Watermill's universal Pub/Sub
// suite with the outbox in the middle: each message is published with the
// outbox's AutoTxPublisher, committed in a transaction of its own, moved to
// Kafka by a running Forwarder, and read with broker.NewSubscriber. The
// topics have one partition, so that the suite's order checks apply (Kafka
// orders partitions, not topics); a new subscriber of a group starts where
// the group is.
func TestUniversalPubSubThroughTheOutbox(t *testing.T) {
	e := newEnv(t)
	e.startForwarder(e.forwarderConfig())
	pub := e.o.AutoTxPublisher()
	var mu sync.Mutex
	groups := map[string]string{}
	groupOf := func(t *testing.T) string {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := groups[t.Name()]; !ok {
			groups[t.Name()] = kafkatest.Group(t, "outbox-suite")
		}
		return groups[t.Name()]
	}
	subscriber := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		sub, err := broker.NewSubscriber(broker.Config{Brokers: e.brokers, ConsumerGroup: group, NackResendSleep: 10 * time.Millisecond,
			Provision: broker.ProvisionConfig{Partitions: 1}, Logger: e.logger, Sarama: func(sc *sarama.Config) {
				sc.Consumer.Group.Session.Timeout = 6 * time.Second
				sc.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
				sc.Consumer.Group.Rebalance.Timeout = 3 * time.Second
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Close() }) // TestPublishSubscribeInOrder leaves its subscribers open
		return pub, sub
	}
	tests.TestPubSub(t, tests.Features{ConsumerGroups: true, Persistent: true, GuaranteedOrder: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return subscriber(t, groupOf(t)) },
		func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
			return subscriber(t, groupOf(t)+"-"+group)
		})
}
