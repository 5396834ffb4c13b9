package broker_test

import (
	"errors"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestProducerSendsABatchOfTopics: one SendMessages call with records of
// two topics, marshaled by the Producer's marshaler, reaches both with
// the UUID, the metadata and the partition key as record key, and a
// subscriber of the package reads them back as they were.
func TestProducerSendsABatchOfTopics(t *testing.T) {
	brokers := kototest.Brokers(t)
	p, err := broker.NewProducer(broker.Config{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a, b := kototest.Topic(t, "a"), kototest.Topic(t, "b")
	var recs []*sarama.ProducerMessage
	var sent []*message.Message
	for i, topic := range []string{a, b, a} {
		msg := message.NewMessage(watermill.NewUUID(), []byte{byte('0' + i)})
		msg.Metadata.Set(koto.PartitionKeyMetadataKey, "key")
		msg.Metadata.Set("name", "thing")
		rec, err := p.Marshaler.Marshal(topic, msg)
		if err != nil {
			t.Fatal(err)
		}
		if string(rec.Key.(sarama.ByteEncoder)) != "key" {
			t.Fatalf("record key %v, want the partition key", rec.Key)
		}
		recs, sent = append(recs, rec), append(sent, msg)
	}
	if err := p.SendMessages(recs); err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string][]*message.Message{a: {sent[0], sent[2]}, b: {sent[1]}} {
		sub := kototest.NewSubscriber(t, broker.Config{Brokers: brokers, ConsumerGroup: kototest.Group(t, "g")})
		got := kototest.AckN(t, kototest.Subscribe(t, sub, topic), len(want))
		for i, m := range got {
			if m.UUID != want[i].UUID || string(m.Payload) != string(want[i].Payload) || m.Metadata.Get("name") != "thing" {
				t.Fatalf("%s: got %s %q %v, want %s %q", topic, m.UUID, m.Payload, m.Metadata, want[i].UUID, want[i].Payload)
			}
		}
	}
}

func TestNewProducerRejectsBadConfig(t *testing.T) {
	if _, err := broker.NewProducer(broker.Config{}); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Fatalf("no brokers: %v", err)
	}
	_, err := broker.NewProducer(broker.Config{Brokers: []string{"127.0.0.1:1"}, Sarama: func(sc *sarama.Config) { sc.Producer.Idempotent = true; sc.Net.MaxOpenRequests = 5 }})
	if !errors.Is(err, koto.ErrInvalidConfig) {
		t.Fatalf("a sarama configuration sarama refuses: %v", err)
	}
}
