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
		name   string
		mutate func(*broker.Config)
		field  string
	}{
		{"no brokers", func(c *broker.Config) { c.Brokers = nil }, "broker.Config.Brokers is empty"},
		{"broker without port", func(c *broker.Config) { c.Brokers = []string{"localhost"} }, "broker.Config.Brokers[0]"},
		{"bad initial offset", func(c *broker.Config) { c.InitialOffset = 42 }, "broker.Config.InitialOffset"},
		{"SASL mechanism not supported", func(c *broker.Config) {
			c.SASL = broker.SASLConfig{Mechanism: sarama.SASLTypeOAuth, User: "u", Password: "p"}
		}, "broker.Config.SASL.Mechanism"},
		{"SASL password without user", func(c *broker.Config) { c.SASL.Password = "p" }, "broker.Config.SASL.User"},
		{"negative partitions", func(c *broker.Config) { c.Provision.Partitions = -2 }, "broker.Config.Provision.Partitions"},
		{"unknown partitioner", func(c *broker.Config) { c.Partitioner = 7 }, "broker.Config.Partitioner is Partitioner(7)"},
		{"group instance ID with a space", func(c *broker.Config) { c.GroupInstanceID = "pod 0" }, `broker.Config.GroupInstanceID is "pod 0"`},
		{"static membership before Kafka 2.3", func(c *broker.Config) {
			c.GroupInstanceID, c.KafkaVersion = "pod-0", sarama.V2_2_0_0
		}, "broker.Config.GroupInstanceID is set, but KafkaVersion 2.2.0 predates"},
		{"sarama hook breaks idempotence", func(c *broker.Config) {
			c.Sarama = func(sc *sarama.Config) { sc.Net.MaxOpenRequests = 5; sc.Producer.Idempotent = true }
		}, "broker.Config.Sarama"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.mutate(&cfg)
			_, pubErr := broker.NewPublisher(cfg)
			assertConfigErr(t, "NewPublisher", pubErr, tt.field)
			if tt.name == "sarama hook breaks idempotence" {
				return // the consumer side does not use the idempotent producer
			}
			_, subErr := broker.NewSubscriber(cfg)
			assertConfigErr(t, "NewSubscriber", subErr, tt.field)
		})
	}
}

func TestNewSubscriberRequiresConsumerGroup(t *testing.T) {
	_, err := broker.NewSubscriber(broker.Config{Brokers: []string{"127.0.0.1:1"}})
	assertConfigErr(t, "NewSubscriber", err, "broker.Config.ConsumerGroup is empty")
}

// TestValidateReportsEveryProblem: Validate names every invalid field of
// the configuration and its SASL and Provision parts, one a line, and a
// subscriber's missing ConsumerGroup comes with the others.
func TestValidateReportsEveryProblem(t *testing.T) {
	bad := broker.Config{
		Brokers:       []string{"localhost", ":9092"},
		InitialOffset: 42,
		SASL:          broker.SASLConfig{Mechanism: sarama.SASLTypeOAuth, Password: "p"},
		Provision:     broker.ProvisionConfig{Partitions: -2, ReplicationFactor: -3},
	}
	lines := []string{
		`broker.Config.Brokers[0] is "localhost"; want host:port, e.g. "127.0.0.1:9092"`,
		`broker.Config.Brokers[1] is ":9092"; want host:port, e.g. "127.0.0.1:9092"`,
		"broker.Config.InitialOffset is 42; use sarama.OffsetOldest (-2) or sarama.OffsetNewest (-1), or 0 for the default (-2)",
		"broker.Config.SASL.User is empty but Password or Mechanism is set; set User to turn SASL on",
		`broker.Config.SASL.Mechanism is "OAUTHBEARER"; use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, or configure other mechanisms in Config.Sarama`,
		"broker.Config.Provision.Partitions is -2; use 1 or more (0 means 3)",
		"broker.Config.Provision.ReplicationFactor is -3; use 1 or more (0 means 1, production wants 3)",
	}
	wantErr(t, "Validate", bad.Validate(), lines)
	_, err := broker.NewSubscriber(bad)
	wantErr(t, "NewSubscriber", err, append(lines,
		"broker.Config.ConsumerGroup is empty; set it to the group this subscriber consumes in, e.g. topics.ConsumerGroup(service, eventType)"))
}

// wantErr checks that err is a configuration error of exactly these lines.
func wantErr(t *testing.T, what string, err error, lines []string) {
	t.Helper()
	const prefix = "invalid configuration: "
	want := prefix + strings.Join(lines, "\n"+prefix)
	if err == nil || err.Error() != want || !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("%s:\n got %v\nwant %s\nwrapping ErrInvalidConfig", what, err, want)
	}
}

func assertConfigErr(t *testing.T, ctor string, err error, field string) {
	t.Helper()
	if !errors.Is(err, koto.ErrInvalidConfig) {
		t.Fatalf("%s error = %v, want one wrapping ErrInvalidConfig", ctor, err)
	}
	if !strings.Contains(err.Error(), "invalid configuration: "+field) {
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
