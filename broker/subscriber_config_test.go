package broker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/koto-dev/watermill-koto/broker"
)

func TestNewSubscriberRejectsBadConsumptionSettings(t *testing.T) {
	ok := broker.Config{Brokers: []string{"127.0.0.1:1"}, ConsumerGroup: "g"}
	tests := map[string]struct {
		mutate func(*broker.Config)
		field  string
	}{
		"negative concurrency":          {func(c *broker.Config) { c.Concurrency = -1 }, "Config.Concurrency"},
		"concurrency over the limit":    {func(c *broker.Config) { c.Concurrency = (1 << 16) + 1 }, "Config.Concurrency"},
		"unknown ordering":              {func(c *broker.Config) { c.Concurrency, c.Ordering = 8, 7 }, "Config.Ordering"},
		"unordered without concurrency": {func(c *broker.Config) { c.Ordering = broker.Unordered }, "Config.Ordering"},
		"negative buffer records":       {func(c *broker.Config) { c.PartitionBufferRecords = -1 }, "Config.PartitionBufferRecords"},
		"negative buffer bytes":         {func(c *broker.Config) { c.PartitionBufferBytes = -1 }, "Config.PartitionBufferBytes"},
		"negative drain timeout":        {func(c *broker.Config) { c.DrainTimeout = -time.Second }, "Config.DrainTimeout"},
		"drain outlasts a rebalance": {func(c *broker.Config) {
			c.DrainTimeout = 5 * time.Second
			c.Sarama = func(sc *sarama.Config) { sc.Consumer.Group.Rebalance.Timeout = 3 * time.Second }
		}, "Config.DrainTimeout"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := ok
			tt.mutate(&cfg)
			_, err := broker.NewSubscriber(cfg)
			assertConfigErr(t, "NewSubscriber", err, "broker."+tt.field)
		})
	}
}

// TestValidateNamesEveryBadConsumptionSetting: one error names them all.
func TestValidateNamesEveryBadConsumptionSetting(t *testing.T) {
	cfg := broker.Config{Brokers: []string{"127.0.0.1:1"}, Concurrency: -1, PartitionBufferBytes: -1, DrainTimeout: -1}
	err := cfg.Validate()
	for _, field := range []string{"Config.Concurrency", "Config.PartitionBufferBytes", "Config.DrainTimeout"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate() = %v, want an error naming %s", err, field)
		}
	}
}

// TestConcurrentSubscriberStartsAndCloses: a subscriber of every mode
// closes without having subscribed, its workers with it.
func TestConcurrentSubscriberStartsAndCloses(t *testing.T) {
	for _, cfg := range []broker.Config{
		{Concurrency: 64},
		{Concurrency: 8, Ordering: broker.Unordered},
	} {
		cfg.Brokers, cfg.ConsumerGroup = []string{"127.0.0.1:1"}, "g"
		sub, err := broker.NewSubscriber(cfg)
		if err != nil {
			t.Fatalf("NewSubscriber(%+v): %v", cfg, err)
		}
		if err := sub.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if _, err := sub.Subscribe(t.Context(), "topic"); err == nil {
			t.Error("Subscribe after Close succeeded")
		}
	}
}
