package broker_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/koto-dev/watermill-koto/broker"
)

func TestConstructorsRejectBadConfig(t *testing.T) {
	ok := broker.Config{Brokers: []string{"127.0.0.1:1"}, ConsumerGroup: "g"}
	tests := []struct {
		name      string
		mutate    func(*broker.Config)
		wantErr   error
		wantField string
	}{
		{"no brokers", func(c *broker.Config) { c.Brokers = nil }, broker.ErrNoBrokers, "Config.Brokers"},
		{"broker without port", func(c *broker.Config) { c.Brokers = []string{"localhost"} }, broker.ErrInvalidConfig, "Config.Brokers[0]"},
		{"bad initial offset", func(c *broker.Config) { c.InitialOffset = 42 }, broker.ErrInvalidConfig, "Config.InitialOffset"},
		{"sarama hook breaks idempotence", func(c *broker.Config) {
			c.Sarama = func(sc *sarama.Config) { sc.Net.MaxOpenRequests = 5; sc.Producer.Idempotent = true }
		}, broker.ErrInvalidConfig, "Config.Sarama"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.mutate(&cfg)
			_, pubErr := broker.NewPublisher(cfg, nil)
			assertConfigErr(t, "NewPublisher", pubErr, tt.wantErr, tt.wantField)
			if tt.name == "sarama hook breaks idempotence" {
				return // the consumer side does not use the idempotent producer
			}
			_, subErr := broker.NewSubscriber(cfg, nil)
			assertConfigErr(t, "NewSubscriber", subErr, tt.wantErr, tt.wantField)
		})
	}
}

func TestNewSubscriberRequiresConsumerGroup(t *testing.T) {
	_, err := broker.NewSubscriber(broker.Config{Brokers: []string{"127.0.0.1:1"}}, nil)
	assertConfigErr(t, "NewSubscriber", err, broker.ErrNoConsumerGroup, "Config.ConsumerGroup")
}

func assertConfigErr(t *testing.T, ctor string, err, want error, field string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s error = %v, want one wrapping %v", ctor, err, want)
	}
	if !strings.Contains(err.Error(), field) {
		t.Errorf("%s error %q does not name the field %s", ctor, err, field)
	}
}

func TestZeroConfigGetsDefaults(t *testing.T) {
	cfg := broker.Config{Brokers: []string{"127.0.0.1:1"}, ConsumerGroup: "g"}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate of a config with only the required fields: %v", err)
	}
	sub, err := broker.NewSubscriber(cfg, nil)
	if err != nil {
		t.Fatalf("NewSubscriber with only the required fields: %v", err)
	}
	if err := sub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestSaramaConsumerConfig(t *testing.T) {
	sc, err := broker.SaramaConsumerConfig(broker.Config{Brokers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatalf("a config without a consumer group: %v", err)
	}
	if sc.Consumer.Offsets.Initial != sarama.OffsetOldest || sc.ClientID != broker.DefaultClientID {
		t.Errorf("defaults not applied: initial offset %d, client ID %q", sc.Consumer.Offsets.Initial, sc.ClientID)
	}
	_, err = broker.SaramaConsumerConfig(broker.Config{})
	assertConfigErr(t, "SaramaConsumerConfig", err, broker.ErrNoBrokers, "Config.Brokers")
}
