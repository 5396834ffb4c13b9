package broker_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
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

// TestValidateFitsDrainTimeoutInTheRebalanceTimeout: Validate refuses a
// DrainTimeout that is not shorter than the rebalance timeout in effect,
// sarama's default (60s) or what Config.Sarama sets, and says what to
// change; the default always fits.
func TestValidateFitsDrainTimeoutInTheRebalanceTimeout(t *testing.T) {
	rebalance := func(d time.Duration) func(*sarama.Config) {
		return func(sc *sarama.Config) { sc.Consumer.Group.Rebalance.Timeout = d }
	}
	tests := map[string]struct {
		drain time.Duration
		hook  func(*sarama.Config)
		want  string // the error's text; empty when valid
	}{
		"default":                      {},
		"default, short rebalance":     {hook: rebalance(3 * time.Second)},
		"shorter than the default":     {drain: 59 * time.Second},
		"as long as the default":       {drain: time.Minute, want: "is 1m0s, not shorter than sarama's Consumer.Group.Rebalance.Timeout (1m0s): the group would drop the member mid-drain; lower DrainTimeout below 1m0s, or raise Consumer.Group.Rebalance.Timeout above 1m0s in Config.Sarama"},
		"longer than the default":      {drain: 90 * time.Second, want: "is 1m30s, not shorter than sarama's Consumer.Group.Rebalance.Timeout (1m0s)"},
		"within a raised rebalance":    {drain: 90 * time.Second, hook: rebalance(2 * time.Minute)},
		"longer than a lowered one":    {drain: 5 * time.Second, hook: rebalance(3 * time.Second), want: "raise Consumer.Group.Rebalance.Timeout above 5s in Config.Sarama"},
		"as long as a lowered one":     {drain: 3 * time.Second, hook: rebalance(3 * time.Second), want: "lower DrainTimeout below 3s"},
		"shorter than a lowered one":   {drain: 2 * time.Second, hook: rebalance(3 * time.Second)},
		"hook that leaves it as it is": {drain: 59 * time.Second, hook: func(sc *sarama.Config) { sc.Consumer.Fetch.Max = 1 << 20 }},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := broker.Config{Brokers: []string{"127.0.0.1:1"}, DrainTimeout: tt.drain, Sarama: tt.hook}
			err := cfg.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, koto.ErrInvalidConfig) || !strings.Contains(err.Error(), "invalid configuration: broker.Config.DrainTimeout is ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error wrapping ErrInvalidConfig that names broker.Config.DrainTimeout and says %q", err, tt.want)
			}
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
// closes without having subscribed, having started nothing, and then
// refuses Subscribe with ErrSubscriberClosed.
func TestConcurrentSubscriberStartsAndCloses(t *testing.T) {
	kototest.VerifyNoLeaks(t)
	for _, cfg := range []broker.Config{
		{},
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
		if _, err := sub.Subscribe(t.Context(), "topic"); !errors.Is(err, broker.ErrSubscriberClosed) {
			t.Errorf("Subscribe after Close = %v, want ErrSubscriberClosed", err)
		}
	}
}
