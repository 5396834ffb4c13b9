package broker_test

import (
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
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
	brokers := kototest.Brokers(t)
	for _, mode := range []struct {
		name        string
		concurrency int
	}{{"one at a time", 0}, {"concurrent", 16}} {
		for _, topics := range []struct {
			name       string
			partitions int32
		}{{"partitions", 0}, {"one partition", 1}} {
			t.Run(mode.name+", "+topics.name, func(t *testing.T) {
				features := tests.Features{ConsumerGroups: true, Persistent: true, GuaranteedOrder: topics.partitions == 1}
				cfg := broker.Config{Brokers: brokers, NackResendSleep: 10 * time.Millisecond, Concurrency: mode.concurrency,
					Provision: broker.ProvisionConfig{Partitions: topics.partitions}, Sarama: kototest.QuickGroupSession}
				kototest.UniversalSuite(t, features, func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
					c := cfg
					c.ConsumerGroup = group
					return kototest.NewPublisher(t, c), kototest.NewSubscriber(t, c)
				})
			})
		}
	}
}
