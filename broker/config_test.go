package broker_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

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
		{"no brokers", func(c *broker.Config) { c.Brokers = nil }, koto.ErrInvalidConfig, "Config.Brokers"},
		{"broker without port", func(c *broker.Config) { c.Brokers = []string{"localhost"} }, koto.ErrInvalidConfig, "Config.Brokers[0]"},
		{"bad initial offset", func(c *broker.Config) { c.InitialOffset = 42 }, koto.ErrInvalidConfig, "Config.InitialOffset"},
		{"SASL mechanism not supported", func(c *broker.Config) {
			c.SASL = broker.SASLConfig{Mechanism: sarama.SASLTypeOAuth, User: "u", Password: "p"}
		}, koto.ErrInvalidConfig, "Config.SASL.Mechanism"},
		{"SASL password without user", func(c *broker.Config) { c.SASL.Password = "p" }, koto.ErrInvalidConfig, "Config.SASL.User"},
		{"negative partitions", func(c *broker.Config) { c.Provision.Partitions = -2 }, koto.ErrInvalidConfig, "Config.Provision.Partitions"},
		{"sarama hook breaks idempotence", func(c *broker.Config) {
			c.Sarama = func(sc *sarama.Config) { sc.Net.MaxOpenRequests = 5; sc.Producer.Idempotent = true }
		}, koto.ErrInvalidConfig, "Config.Sarama"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.mutate(&cfg)
			_, pubErr := broker.NewPublisher(cfg)
			assertConfigErr(t, "NewPublisher", pubErr, tt.wantErr, tt.wantField)
			if tt.name == "sarama hook breaks idempotence" {
				return // the consumer side does not use the idempotent producer
			}
			_, subErr := broker.NewSubscriber(cfg)
			assertConfigErr(t, "NewSubscriber", subErr, tt.wantErr, tt.wantField)
		})
	}
}

func TestNewSubscriberRequiresConsumerGroup(t *testing.T) {
	_, err := broker.NewSubscriber(broker.Config{Brokers: []string{"127.0.0.1:1"}})
	assertConfigErr(t, "NewSubscriber", err, koto.ErrInvalidConfig, "Config.ConsumerGroup")
}

func assertConfigErr(t *testing.T, ctor string, err, want error, field string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s error = %v, want one wrapping %v", ctor, err, want)
	}
	if !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("%s error %v does not wrap ErrInvalidConfig", ctor, err)
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
	sub, err := broker.NewSubscriber(cfg)
	if err != nil {
		t.Fatalf("NewSubscriber with only the required fields: %v", err)
	}
	if err := sub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestSplitBrokers(t *testing.T) {
	tests := map[string][]string{
		"":                       nil,
		" , ":                    nil,
		"k1:9092":                {"k1:9092"},
		" k1:9092, ,k2:9093 ,":   {"k1:9092", "k2:9093"},
		"127.0.0.1:1,[::1]:9092": {"127.0.0.1:1", "[::1]:9092"},
	}
	for in, want := range tests {
		if got := broker.SplitBrokers(in); !slices.Equal(got, want) {
			t.Errorf("SplitBrokers(%q) = %q, want %q", in, got, want)
		}
	}
}
