package kototest

import (
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
)

// UniversalSuite runs Watermill's universal Pub/Sub suite with features on
// the pub/subs that newPubSub makes in a consumer group. Each test of the
// suite gets a group of its own, the same for every pub/sub it makes, as
// the suite expects of one service: a second subscriber continues where
// the first stopped. newPubSub's subscribers must also be closed when
// their test ends, as [NewSubscriber]'s are: TestPublishSubscribeInOrder
// leaves its subscribers open (its deferred Close runs at once).
func UniversalSuite(t *testing.T, features tests.Features, newPubSub func(t *testing.T, group string) (message.Publisher, message.Subscriber)) {
	var mu sync.Mutex
	groups := map[string]string{}
	groupOf := func(t *testing.T) string {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := groups[t.Name()]; !ok {
			groups[t.Name()] = Group(t, "suite")
		}
		return groups[t.Name()]
	}
	tests.TestPubSub(t, features,
		func(t *testing.T) (message.Publisher, message.Subscriber) { return newPubSub(t, groupOf(t)) },
		func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
			return newPubSub(t, groupOf(t)+"-"+group)
		})
}

// QuickGroupSession shortens a consumer group's session and rebalance, for
// tests that close subscribers and start new ones in the same group.
func QuickGroupSession(sc *sarama.Config) {
	sc.Consumer.Group.Session.Timeout = 6 * time.Second
	sc.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	sc.Consumer.Group.Rebalance.Timeout = 3 * time.Second
}
