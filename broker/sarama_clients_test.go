package broker_test

import (
	"errors"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestSaramaClientsUseTheSecurityConfig: the raw sarama client connects
// with Config's SASL and TLS and reads what NewProducer wrote, key and
// headers untouched; wrong credentials fail with ErrAuthenticationFailed.
func TestSaramaClientUsesTheSecurityConfig(t *testing.T) {
	_, cfg := kototest.SecureBroker(t, sarama.SASLTypeSCRAMSHA512)
	ctx := kototest.Context(t)
	topic := kototest.Topic(t, "raw")
	cfg.Provision.Partitions = 1
	if err := broker.ProvisionTopics(ctx, cfg, topic); err != nil {
		t.Fatalf("ProvisionTopics: %v", err)
	}

	producer, err := broker.NewProducer(cfg)
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	defer producer.Close()
	header := sarama.RecordHeader{Key: []byte("h"), Value: []byte("v")}
	_, offset, err := producer.SendMessage(&sarama.ProducerMessage{
		Topic: topic, Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder("raw"), Headers: []sarama.RecordHeader{header},
	})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}

	client, err := broker.NewSaramaClient(cfg)
	if err != nil {
		t.Fatalf("NewSaramaClient: %v", err)
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, offset)
	if err != nil {
		t.Fatalf("ConsumePartition: %v", err)
	}
	defer pc.Close()
	select {
	case rec := <-pc.Messages():
		if string(rec.Key) != "k" || string(rec.Value) != "raw" || len(rec.Headers) != 1 || string(rec.Headers[0].Value) != "v" {
			t.Fatalf("read key %q value %q headers %v, want what was sent", rec.Key, rec.Value, rec.Headers)
		}
	case <-ctx.Done():
		t.Fatal("no record read")
	}

	bad := cfg
	bad.SASL.Password += "-wrong"
	if _, err := broker.NewSaramaClient(bad); !errors.Is(err, broker.ErrAuthenticationFailed) {
		t.Errorf("NewSaramaClient with a wrong password: %v, want ErrAuthenticationFailed", err)
	}
}

func TestSaramaClientRejectsBadConfig(t *testing.T) {
	if _, err := broker.NewSaramaClient(broker.Config{}); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("NewSaramaClient without brokers: %v, want ErrNoBrokers", err)
	}
	if _, err := broker.NewSaramaClient(broker.Config{Brokers: []string{"no-port"}}); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("NewSaramaClient with an address without port: %v, want ErrInvalidConfig", err)
	}
}
