package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/internal/kafkatest"
)

// testTimeout bounds every wait in these tests.
const testTimeout = kafkatest.Timeout

// testContext ends after testTimeout or with the test.
func testContext(t *testing.T) context.Context { return kafkatest.Context(t) }

// provisionCfg is a configuration that provisions topics with partitions
// partitions.
func provisionCfg(brokers []string, partitions int32) broker.Config {
	return broker.Config{Brokers: brokers, Provision: broker.ProvisionConfig{Partitions: partitions}}
}

// newTopic provisions a new topic with partitions partitions and returns
// its name, which starts with prefix.
func newTopic(ctx context.Context, t testing.TB, brokers []string, prefix string, partitions int32) string {
	t.Helper()
	topic := kafkatest.Topic(t, prefix)
	if err := broker.ProvisionTopics(ctx, provisionCfg(brokers, partitions), topic); err != nil {
		t.Fatalf("ProvisionTopics: %v", err)
	}
	return topic
}

func newPublisher(t *testing.T, cfg broker.Config) *broker.Publisher {
	t.Helper()
	pub, err := broker.NewPublisher(cfg, nil)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

func newSubscriber(t *testing.T, cfg broker.Config) *kafka.Subscriber {
	t.Helper()
	sub, err := broker.NewSubscriber(cfg, nil)
	if err != nil {
		t.Fatalf("NewSubscriber: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// publish publishes one message per payload; key, if not empty, is the
// partition key of all of them.
func publish(t *testing.T, pub message.Publisher, topic, key string, payloads ...string) []*message.Message {
	t.Helper()
	msgs := make([]*message.Message, len(payloads))
	for i, p := range payloads {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(p))
		if key != "" {
			msgs[i].Metadata.Set(broker.PartitionKeyMetadataKey, key)
		}
	}
	if err := pub.Publish(topic, msgs...); err != nil {
		t.Fatalf("Publish to %s: %v", topic, err)
	}
	return msgs
}

func subscribe(ctx context.Context, t *testing.T, sub message.Subscriber, topic string) <-chan *message.Message {
	t.Helper()
	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatalf("Subscribe(%s): %v", topic, err)
	}
	return msgs
}

// next returns the next message or fails the test when ctx ends first.
func next(ctx context.Context, t *testing.T, msgs <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-msgs:
		if !ok {
			t.Fatal("subscription channel closed")
		}
		return m
	case <-ctx.Done():
		t.Fatalf("no message: %v", ctx.Err())
		return nil
	}
}

// ackN receives and acks n messages.
func ackN(ctx context.Context, t *testing.T, msgs <-chan *message.Message, n int) []*message.Message {
	t.Helper()
	got := make([]*message.Message, 0, n)
	for len(got) < n {
		m := next(ctx, t, msgs)
		m.Ack()
		got = append(got, m)
	}
	return got
}

func payloads(msgs []*message.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Payload)
	}
	return out
}

func newAdmin(t *testing.T, brokers []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// committed returns the group's committed offset of partition 0 of topic,
// or -1 when there is none.
func committed(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string) int64 {
	t.Helper()
	offsets, err := adm.FetchOffsetsForTopics(ctx, group, topic)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	o, ok := offsets.Lookup(topic, 0)
	if !ok || o.Err != nil {
		return -1
	}
	return o.At
}

// waitCommitted polls until the group's committed offset of partition 0 of
// topic is want.
func waitCommitted(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string, want int64) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		got := committed(ctx, t, adm, group, topic)
		if got == want {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("group %s committed offset on %s is %d, want %d: %v", group, topic, got, want, ctx.Err())
		}
	}
}

func startTailReader(ctx context.Context, t *testing.T, cfg broker.Config, topic string, handle func(*message.Message)) *broker.TailReader {
	t.Helper()
	r, err := broker.NewTailReader(cfg, topic, handle, nil)
	if err != nil {
		t.Fatalf("NewTailReader: %v", err)
	}
	if err := r.Start(ctx); err != nil {
		_ = r.Close()
		t.Fatalf("TailReader.Start: %v", err)
	}
	return r
}

func closeTailReader(t *testing.T, r *broker.TailReader) {
	t.Helper()
	if err := r.Close(); err != nil {
		t.Errorf("TailReader.Close: %v", err)
	}
}
