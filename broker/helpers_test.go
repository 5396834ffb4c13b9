package broker_test

import (
	"context"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
)

// provisionCfg is a configuration that provisions topics with partitions
// partitions.
func provisionCfg(brokers []string, partitions int32) broker.Config {
	return broker.Config{Brokers: brokers, Provision: broker.ProvisionConfig{Partitions: partitions}}
}

// publish publishes one message per payload; key, if not empty, is the
// partition key of all of them.
func publish(t *testing.T, pub message.Publisher, topic, key string, payloads ...string) []*message.Message {
	t.Helper()
	msgs := make([]*message.Message, len(payloads))
	for i, p := range payloads {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(p))
		if key != "" {
			msgs[i].Metadata.Set(koto.PartitionKeyMetadataKey, key)
		}
	}
	if err := pub.Publish(topic, msgs...); err != nil {
		t.Fatalf("Publish to %s: %v", topic, err)
	}
	return msgs
}

func startTailReader(ctx context.Context, t *testing.T, cfg broker.Config, topic string, handle func(*message.Message)) *broker.TailReader {
	t.Helper()
	r, err := broker.NewTailReader(cfg, topic, handle)
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
