package cqrs_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/middleware"
)

// TestValidateMinimalConfigs checks that Validate counts zero fields as
// their defaults: a configuration with only its required fields is valid.
func TestValidateMinimalConfigs(t *testing.T) {
	brokers := broker.Config{Brokers: []string{"127.0.0.1:1"}}
	configs := map[string]interface{ Validate() error }{
		"ServiceConfig":           cqrs.ServiceConfig{Name: "orders", Broker: brokers},
		"CommandDispatcherConfig": cqrs.CommandDispatcherConfig{Service: "orders", Broker: brokers},
		"EventPublisherConfig":    cqrs.EventPublisherConfig{Service: "orders"},
	}
	for name, cfg := range configs {
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s.Validate() of a minimal config: %v", name, err)
		}
	}
	bad := cqrs.CommandDispatcherConfig{Service: "orders", Broker: brokers, ReplyTopic: "no spaces"}
	if err := bad.Validate(); !errors.Is(err, cqrs.ErrInvalidRoute) {
		t.Errorf("Validate() of an invalid ReplyTopic: %v, want ErrInvalidRoute", err)
	}
	negative := cqrs.EventPublisherConfig{Service: "orders", Timeout: -time.Second}
	if err := negative.Validate(); !errors.Is(err, cqrs.ErrInvalidConfig) || !strings.Contains(err.Error(), "Timeout") {
		t.Errorf("EventPublisherConfig.Validate() of a negative Timeout: %v, want ErrInvalidConfig naming Timeout", err)
	}
}

// TestValidateChecksBrokerConfig: the broker configuration is validated
// with the rest, provisioning and security settings included.
func TestValidateChecksBrokerConfig(t *testing.T) {
	bad := broker.Config{Brokers: []string{"127.0.0.1:1"}, Provision: broker.ProvisionConfig{Partitions: -1}}
	configs := map[string]interface{ Validate() error }{
		"ServiceConfig":           cqrs.ServiceConfig{Name: "orders", Broker: bad},
		"CommandDispatcherConfig": cqrs.CommandDispatcherConfig{Service: "orders", Broker: bad},
	}
	for name, cfg := range configs {
		err := cfg.Validate()
		if !errors.Is(err, cqrs.ErrInvalidConfig) || !errors.Is(err, koto.ErrInvalidConfig) {
			t.Errorf("%s.Validate() with negative Broker.Provision.Partitions: %v, want cqrs.ErrInvalidConfig and koto.ErrInvalidConfig", name, err)
		}
	}
}

// TestConfigErrorsNameTheField: every configuration a constructor refuses
// fails Validate with an error that wraps ErrInvalidConfig and names the
// field, sub-configurations included.
func TestConfigErrorsNameTheField(t *testing.T) {
	brokers := broker.Config{Brokers: []string{"127.0.0.1:1"}}
	cases := []struct {
		field string
		cfg   interface{ Validate() error }
	}{
		{"Service", cqrs.EventPublisherConfig{}},
		{"Service", cqrs.EventPublisherConfig{Service: "or ders"}},
		{"Timeout", cqrs.EventPublisherConfig{Service: "orders", Timeout: -time.Second}},
		{"Service", cqrs.CommandDispatcherConfig{Broker: brokers}},
		{"Timeout", cqrs.CommandDispatcherConfig{Service: "orders", Broker: brokers, Timeout: -1}},
		{"ReplyTopic", cqrs.CommandDispatcherConfig{Service: "orders", Broker: brokers, ReplyTopic: "no spaces"}},
		{"Broker", cqrs.CommandDispatcherConfig{Service: "orders"}},
		{"Name", cqrs.ServiceConfig{Broker: brokers}},
		{"IdempotencyWindow", cqrs.ServiceConfig{Name: "orders", Broker: brokers, IdempotencyWindow: -time.Hour}},
		{"DeadLetter", cqrs.ServiceConfig{Name: "orders", Broker: brokers, DeadLetter: middleware.DeadLetterConfig{MaxAttempts: -1}}},
		{"Transactional", cqrs.ServiceConfig{Name: "orders", Broker: brokers, Transactional: true}},
		{"Broker", cqrs.ServiceConfig{Name: "orders"}},
		{"Broker", cqrs.DurableOutboxConfig{}},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if !errors.Is(err, cqrs.ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%T naming %s: got %v, want ErrInvalidConfig naming the field", c.cfg, c.field, err)
		}
	}
	// NewService refuses what Validate refuses, before any Register.
	_, err := cqrs.NewService(cqrs.ServiceConfig{Name: "orders", Broker: brokers, DeadLetter: middleware.DeadLetterConfig{MaxAttempts: -1}})
	if !errors.Is(err, cqrs.ErrInvalidConfig) || !errors.Is(err, koto.ErrInvalidConfig) || !strings.Contains(err.Error(), "MaxAttempts") {
		t.Errorf("NewService with a negative DeadLetter.MaxAttempts: %v, want cqrs's and middleware's ErrInvalidConfig naming MaxAttempts", err)
	}
}
