package cqrs_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
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
		if !errors.Is(err, cqrs.ErrInvalidConfig) || !errors.Is(err, broker.ErrInvalidConfig) {
			t.Errorf("%s.Validate() with negative Broker.Provision.Partitions: %v, want cqrs.ErrInvalidConfig and broker.ErrInvalidConfig", name, err)
		}
	}
}
