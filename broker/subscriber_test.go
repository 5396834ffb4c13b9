package broker_test

import (
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestNewGroupReceivesEarlierMessages: a group that joins after messages
// were published still gets them (sarama alone would start at the newest
// offset and skip them).
func TestNewGroupReceivesEarlierMessages(t *testing.T) {
	brokers := kototest.Brokers(t)
	topic := kototest.Topic(t, "early")
	want := []string{"a", "b", "c", "d", "e"}
	publish(t, kototest.NewPublisher(t, broker.Config{Brokers: brokers}), topic, "", want...)

	sub := kototest.NewSubscriber(t, broker.Config{Brokers: brokers, ConsumerGroup: kototest.Group(t, "late")})
	got := kototest.Payloads(kototest.AckN(t, kototest.Subscribe(t, sub, topic), len(want)))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("late group received %v, want %v", got, want)
	}
}

// TestOnlyAckedOffsetsAreCommitted holds the second message of a
// one-partition topic unacked (after one nack and redelivery), checks that
// the committed offset stops before it, and that a new subscriber in the
// group starts with it.
func TestOnlyAckedOffsetsAreCommitted(t *testing.T) {
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "acks")
	group := kototest.Group(t, "acks")
	publish(t, kototest.NewPublisher(t, broker.Config{Brokers: brokers}), topic, "", "first", "second", "third")
	cfg := broker.Config{Brokers: brokers, ConsumerGroup: group, NackResendSleep: -1}

	sub, err := broker.NewSubscriber(cfg)
	if err != nil {
		t.Fatalf("NewSubscriber: %v", err)
	}
	msgs := kototest.Subscribe(t, sub, topic)
	kototest.Receive(t, msgs, "message").Ack()
	kototest.Receive(t, msgs, "message").Nack()
	if m := kototest.Receive(t, msgs, "message"); string(m.Payload) != "second" {
		t.Fatalf("after a nack got %q, want the nacked message again", m.Payload)
	} // left unacked
	kototest.WaitCommitted(t, brokers, group, topic, 1)
	if err := sub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := kototest.Committed(t, brokers, group, topic); got != 1 {
		t.Fatalf("committed offset after close is %d, want 1 (only the first message was acked)", got)
	}

	again := kototest.NewSubscriber(t, cfg)
	if m := kototest.Receive(t, kototest.Subscribe(t, again, topic), "message"); string(m.Payload) != "second" {
		t.Fatalf("the group resumed with %q, want the unacked \"second\"", m.Payload)
	}
}

// TestProtocolVersionsWorkOnEmbeddedBroker round-trips a message with the
// default protocol version and with sarama's newest.
func TestProtocolVersionsWorkOnEmbeddedBroker(t *testing.T) {
	brokers := kototest.Brokers(t)
	for name, v := range map[string]sarama.KafkaVersion{
		"default":                              {},
		"newest " + sarama.MaxVersion.String(): sarama.MaxVersion,
		"watermill-kafka default " + sarama.V2_1_0_0.String(): sarama.V2_1_0_0,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			topic := kototest.Topic(t, "version")
			cfg := broker.Config{Brokers: brokers, KafkaVersion: v, ConsumerGroup: kototest.Group(t, "version")}
			publish(t, kototest.NewPublisher(t, cfg), topic, "key", "ping")
			if m := kototest.Receive(t, kototest.Subscribe(t, kototest.NewSubscriber(t, cfg), topic), "message"); string(m.Payload) != "ping" {
				t.Fatalf("received %q, want \"ping\"", m.Payload)
			}
		})
	}
}

// TestSubscriberPutsPositionInContext: every message's context says where
// it was read: topic, partition, offset, record key, timestamp and the
// group generation.
func TestSubscriberPutsPositionInContext(t *testing.T) {
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "position")
	before := time.Now().Add(-time.Minute)
	publish(t, kototest.NewPublisher(t, broker.Config{Brokers: brokers}), topic, "order-7", "a", "b")
	publish(t, kototest.NewPublisher(t, broker.Config{Brokers: brokers}), topic, "", "c")
	sub := kototest.NewSubscriber(t, broker.Config{Brokers: brokers, ConsumerGroup: kototest.Group(t, "position")})
	msgs := kototest.AckN(t, kototest.Subscribe(t, sub, topic), 3)
	for i, m := range msgs {
		p, ok := koto.PositionFromContext(m.Context())
		if !ok {
			t.Fatalf("message %s has no position", m.Payload)
		}
		wantKey := "order-7"
		if i == 2 {
			wantKey = ""
		}
		if p.Topic != topic || p.Partition != 0 || p.Offset != int64(i) || string(p.Key) != wantKey || (wantKey == "") != (p.Key == nil) || p.Timestamp.Before(before) || p.Generation < 1 {
			t.Errorf("message %s: position %+v, want topic %s, partition 0, offset %d, key %q, a timestamp after %v and a generation",
				m.Payload, p, topic, i, wantKey, before)
		}
	}
}

// TestConcurrentSubscriberStartsWorkersAtSubscribe: a subscriber with
// Config.Concurrency starts its workers once a Subscribe has connected, so
// one never used, or whose Subscribe could not connect, holds no
// goroutine, even left unclosed.
func TestConcurrentSubscriberStartsWorkersAtSubscribe(t *testing.T) {
	kototest.VerifyNoLeaks(t)
	cfg := broker.Config{Brokers: []string{kototest.ClosedAddr(t)}, ConsumerGroup: kototest.Group(t, "unused"), Concurrency: 8}
	if _, err := broker.NewSubscriber(cfg); err != nil {
		t.Fatal(err)
	}
	refused, err := broker.NewSubscriber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := refused.Subscribe(kototest.Context(t), kototest.Topic(t, "refused")); err == nil {
		t.Fatal("Subscribe to a closed port succeeded")
	}
}
