package embedded_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/kototest"
)

func newKgoClient(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceValues produces one record per value, spread round-robin over the
// topic's partitions, and waits for every ack.
func produceValues(t *testing.T, addrs []string, topic string, values ...string) {
	t.Helper()
	cl := newKgoClient(t, addrs, kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
	defer cancel()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(v)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

func values(prefix string, n int) []string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return vs
}

// newGroupSubscriber is a watermill-kafka subscriber in a consumer group, with
// watermill-kafka's own sarama defaults except that a new group starts at the
// oldest offset.
func newGroupSubscriber(t *testing.T, addrs []string, group string) *kafka.Subscriber {
	t.Helper()
	sc := kafka.DefaultSaramaSubscriberConfig()
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{
		Brokers:               addrs,
		ConsumerGroup:         group,
		OverwriteSaramaConfig: sc,
		Unmarshaler:           kafka.DefaultMarshaler{},
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatalf("kafka.NewSubscriber: %v", err)
	}
	return sub
}

// receiveAcked subscribes with a new watermill-kafka subscriber in group,
// acks n messages, waits until the group's committed offsets on topic add up
// to committedAfter, closes the subscriber and returns the payloads.
//
// Waiting for the commit before closing matters: watermill-kafka marks an
// offset after the ack, sarama commits marked offsets every second, and a
// Close that races with the last ack may leave that offset unmarked (the
// message is then delivered again: at-least-once).
func receiveAcked(t *testing.T, addrs []string, group, topic string, n int, committedAfter int64) []string {
	t.Helper()
	sub := newGroupSubscriber(t, addrs, group)
	defer func() {
		if err := sub.Close(); err != nil {
			t.Errorf("close subscriber: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
	defer cancel()
	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatalf("Subscribe(%s): %v", topic, err)
	}
	got := kototest.Payloads(kototest.AckN(t, msgs, n))
	kototest.WaitCommitted(t, addrs, group, topic, committedAfter)
	return got
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[string]int, len(a))
	for _, v := range a {
		seen[v]++
	}
	for _, v := range b {
		seen[v]--
		if seen[v] < 0 {
			return false
		}
	}
	return true
}
