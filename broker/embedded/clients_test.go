package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/kototest"
)

func TestFranzGoProducesAndConsumes(t *testing.T) {
	b := kototest.Embedded(t)
	want := values("kgo", 30)
	produceValues(t, b.Addrs(), "kgo-topic", want...)

	cl := newKgoClient(t, b.Addrs(),
		kgo.ConsumeTopics("kgo-topic"),
		kgo.ConsumerGroup("kgo-group"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
	defer cancel()
	var got []string
	for len(got) < len(want) && ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err0(); err != nil && ctx.Err() == nil {
			t.Fatalf("poll: %v", err)
		}
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !sameSet(got, want) {
		t.Fatalf("consumed %d records %v, want %v", len(got), got, want)
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if total := kototest.Committed(t, b.Addrs(), "kgo-group", "kgo-topic"); total != int64(len(want)) {
		t.Fatalf("group committed %d records in total, want %d", total, len(want))
	}
}

// TestWatermillKafkaGroupConsumesAndCommits runs watermill-kafka (IBM/sarama,
// at watermill-kafka's default protocol version) against the broker.
func TestWatermillKafkaGroupConsumesAndCommits(t *testing.T) {
	b := kototest.Embedded(t)
	want := values("sarama", 20)
	publishWatermill(t, b.Addrs(), "sarama-topic", want...)

	got := receiveAcked(t, b.Addrs(), "sarama-group", "sarama-topic", len(want), int64(len(want)))
	if !sameSet(got, want) {
		t.Fatalf("received %v, want %v", got, want)
	}
}

func publishWatermill(t *testing.T, addrs []string, topic string, payloads ...string) {
	t.Helper()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{
		Brokers:   addrs,
		Marshaler: kafka.DefaultMarshaler{},
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatalf("kafka.NewPublisher: %v", err)
	}
	defer func() { _ = pub.Close() }()
	for _, p := range payloads {
		if err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), []byte(p))); err != nil {
			t.Fatalf("publish to %s: %v", topic, err)
		}
	}
}
