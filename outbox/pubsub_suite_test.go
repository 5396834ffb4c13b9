package outbox_test

import (
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
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
	cfg := broker.Config{Brokers: e.brokers, NackResendSleep: 10 * time.Millisecond,
		Provision: broker.ProvisionConfig{Partitions: 1}, Logger: e.logger, Sarama: kototest.QuickGroupSession}
	features := tests.Features{ConsumerGroups: true, Persistent: true, GuaranteedOrder: true}
	kototest.UniversalSuite(t, features, func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		c := cfg
		c.ConsumerGroup = group
		return pub, kototest.NewSubscriber(t, c)
	})
}
