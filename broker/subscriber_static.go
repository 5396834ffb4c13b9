package broker

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/IBM/sarama"

	"github.com/koto-dev/watermill-koto/internal/config"
	"github.com/koto-dev/watermill-koto/topics"
)

// validateGroupInstanceID checks Config.GroupInstanceID by Kafka's rules
// for an instance ID, which are those of a topic name.
func (c Config) validateGroupInstanceID(p *config.Problems) {
	if c.GroupInstanceID == "" {
		return
	}
	if err := topics.Validate(c.GroupInstanceID); err != nil {
		p.Add("GroupInstanceID", "is %q, which Kafka refuses: an instance ID follows the rules of a topic name (%v); use the instance's stable name, such as a StatefulSet pod's", c.GroupInstanceID, err)
	}
	if !c.KafkaVersion.IsAtLeast(sarama.V2_3_0_0) && c.KafkaVersion != (sarama.KafkaVersion{}) {
		p.Add("GroupInstanceID", "is set, but KafkaVersion %v predates static membership (2.3); raise KafkaVersion or leave GroupInstanceID empty", c.KafkaVersion)
	}
}

// instanceIDs are the group instance IDs of a subscriber's live
// subscriptions, with Config.GroupInstanceID.
type instanceIDs struct {
	mu    sync.Mutex
	inUse map[string]bool
}

// acquire returns the group instance ID of a new subscription to topic:
// base and the topic, "pod-0.orders", with a number for each subscription
// to the topic beside the first that lives, "pod-0.orders.2", so that
// members of one group never fence each other. "" when base is.
func (ids *instanceIDs) acquire(base, topic string) (string, error) {
	if base == "" {
		return "", nil
	}
	ids.mu.Lock()
	defer ids.mu.Unlock()
	id := base + "." + topic
	for n := 2; ids.inUse[id]; n++ {
		id = base + "." + topic + "." + strconv.Itoa(n)
	}
	if err := topics.Validate(id); err != nil {
		return "", fmt.Errorf("broker: the group instance ID of a subscription to %s, Config.GroupInstanceID and the topic, is too long for Kafka; shorten GroupInstanceID: %w", topic, err)
	}
	if ids.inUse == nil {
		ids.inUse = map[string]bool{}
	}
	ids.inUse[id] = true
	return id, nil
}

// release frees the ID of a subscription that ended.
func (ids *instanceIDs) release(id string) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	delete(ids.inUse, id)
}

// memberSarama returns the sarama configuration of a group member with
// the group instance ID id: the subscriber's, with id, when it is set.
func (s *Subscriber) memberSarama(id string) *sarama.Config {
	if id == "" {
		return s.sarama
	}
	sc := *s.sarama
	sc.Consumer.Group.InstanceId = id
	return &sc
}
