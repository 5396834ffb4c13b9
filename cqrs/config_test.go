package cqrs_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
)

// TestValidateMinimalConfigs checks that Validate counts zero fields as
// their defaults: a configuration with only its required fields is valid.
func TestValidateMinimalConfigs(t *testing.T) {
	brokers := broker.Config{Brokers: []string{"127.0.0.1:1"}}
	configs := map[string]interface{ Validate() error }{
		"ServiceConfig":           cqrs.ServiceConfig{Name: "orders", Broker: brokers},
		"CommandDispatcherConfig": cqrs.CommandDispatcherConfig{Service: "orders", Broker: brokers},
		"EventPublisherConfig":    cqrs.EventPublisherConfig{Service: "orders"},
		"DurableOutboxConfig":     cqrs.DurableOutboxConfig{Broker: brokers},
	}
	for name, cfg := range configs {
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s.Validate() of a minimal config: %v", name, err)
		}
	}
	bad := cqrs.CommandDispatcherConfig{Service: "orders", Broker: brokers, ReplyTopic: "no spaces"}
	if err := bad.Validate(); !errors.Is(err, cqrs.ErrInvalidRoute) || !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("Validate() of an invalid ReplyTopic: %v, want ErrInvalidRoute and koto.ErrInvalidConfig", err)
	}
}

// TestConfigErrorsNameTheField: every configuration a constructor refuses
// fails Validate with an error that wraps koto.ErrInvalidConfig and names
// the field by its full path, sub-configurations included.
func TestConfigErrorsNameTheField(t *testing.T) {
	brokers := broker.Config{Brokers: []string{"127.0.0.1:1"}}
	badProvision := broker.Config{Brokers: brokers.Brokers, Provision: broker.ProvisionConfig{Partitions: -1}}
	cases := []struct {
		want string // the start of the error's text
		cfg  interface{ Validate() error }
	}{
		{"invalid configuration: cqrs.EventPublisherConfig.Service is empty; ", cqrs.EventPublisherConfig{}},
		{`invalid configuration: cqrs.EventPublisherConfig.Service "or ders" cannot prefix a topic: `, cqrs.EventPublisherConfig{Service: "or ders"}},
		{"invalid configuration: cqrs.EventPublisherConfig.Timeout is negative (-1s); ", cqrs.EventPublisherConfig{Service: "orders", Timeout: -time.Second}},
		{"invalid configuration: cqrs.CommandDispatcherConfig.Service is empty; ", cqrs.CommandDispatcherConfig{Broker: brokers}},
		{"invalid configuration: cqrs.CommandDispatcherConfig.Timeout is negative (-1ns); ", cqrs.CommandDispatcherConfig{Service: "orders", Broker: brokers, Timeout: -1}},
		{"invalid configuration: cqrs.CommandDispatcherConfig.ReplyTopic cqrs: invalid route: ", cqrs.CommandDispatcherConfig{Service: "orders", Broker: brokers, ReplyTopic: "no spaces"}},
		{"invalid configuration: cqrs.CommandDispatcherConfig.Broker.Brokers is empty; ", cqrs.CommandDispatcherConfig{Service: "orders"}},
		{"invalid configuration: cqrs.CommandDispatcherConfig.Broker.Provision.Partitions is -1; ", cqrs.CommandDispatcherConfig{Service: "orders", Broker: badProvision}},
		{"invalid configuration: cqrs.ServiceConfig.Name is empty; ", cqrs.ServiceConfig{Broker: brokers}},
		{"invalid configuration: cqrs.ServiceConfig.IdempotencyWindow is negative (-1h0m0s); ", cqrs.ServiceConfig{Name: "orders", Broker: brokers, IdempotencyWindow: -time.Hour}},
		{"invalid configuration: cqrs.ServiceConfig.DeadLetter.MaxAttempts is negative (-1); ", cqrs.ServiceConfig{Name: "orders", Broker: brokers, DeadLetter: middleware.DeadLetterConfig{MaxAttempts: -1}}},
		{"invalid configuration: cqrs.ServiceConfig.Broker.Brokers is empty; ", cqrs.ServiceConfig{Name: "orders"}},
		{"invalid configuration: cqrs.ServiceConfig.Broker.Provision.Partitions is -1; ", cqrs.ServiceConfig{Name: "orders", Broker: badProvision}},
		{"invalid configuration: cqrs.DurableOutboxConfig.Broker.Brokers is empty; ", cqrs.DurableOutboxConfig{}},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if !errors.Is(err, koto.ErrInvalidConfig) || err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%T.Validate() = %v, want koto.ErrInvalidConfig starting %q", c.cfg, err, c.want)
		}
	}
	// NewService refuses what Validate refuses, before any Register.
	_, err := cqrs.NewService(cqrs.ServiceConfig{Name: "orders", Broker: brokers, DeadLetter: middleware.DeadLetterConfig{MaxAttempts: -1}})
	if want := "invalid configuration: cqrs.ServiceConfig.DeadLetter.MaxAttempts is negative"; !errors.Is(err, koto.ErrInvalidConfig) || err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("NewService with a negative DeadLetter.MaxAttempts: %v, want koto.ErrInvalidConfig starting %q", err, want)
	}
}

// TestValidateReportsEveryProblem: Validate does not stop at the first
// invalid field; each problem is a line of the one error, in any order.
func TestValidateReportsEveryProblem(t *testing.T) {
	cases := []struct {
		cfg  interface{ Validate() error }
		want []string
	}{
		{cqrs.ServiceConfig{IdempotencyWindow: -time.Hour, DeadLetter: middleware.DeadLetterConfig{MaxAttempts: -1}}, []string{
			"invalid configuration: cqrs.ServiceConfig.Name is empty; ",
			"invalid configuration: cqrs.ServiceConfig.IdempotencyWindow is negative (-1h0m0s); ",
			"invalid configuration: cqrs.ServiceConfig.DeadLetter.MaxAttempts is negative (-1); ",
			"invalid configuration: cqrs.ServiceConfig.Broker.Brokers is empty; ",
		}},
		{cqrs.CommandDispatcherConfig{Timeout: -1}, []string{
			"invalid configuration: cqrs.CommandDispatcherConfig.Service is empty; ",
			"invalid configuration: cqrs.CommandDispatcherConfig.Timeout is negative (-1ns); ",
			"invalid configuration: cqrs.CommandDispatcherConfig.Broker.Brokers is empty; ",
		}},
		{cqrs.EventPublisherConfig{Service: "or ders", Timeout: -1}, []string{
			`invalid configuration: cqrs.EventPublisherConfig.Service "or ders" cannot prefix a topic: `,
			"invalid configuration: cqrs.EventPublisherConfig.Timeout is negative (-1ns); ",
		}},
		{cqrs.DurableOutboxConfig{Outbox: outbox.Config{Table: "bad\x00name"}, Forwarder: outbox.ForwarderConfig{BatchSize: -1}}, []string{
			"invalid configuration: cqrs.DurableOutboxConfig.Broker.Brokers is empty; ",
			`invalid configuration: cqrs.DurableOutboxConfig.Outbox.Table "bad\x00name" contains a NUL byte; `,
			"invalid configuration: cqrs.DurableOutboxConfig.Forwarder.BatchSize is -1; ",
		}},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if !errors.Is(err, koto.ErrInvalidConfig) {
			t.Errorf("%T.Validate() = %v, want koto.ErrInvalidConfig", c.cfg, err)
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != len(c.want) {
			t.Errorf("%T.Validate() reported %d problems, want %d:\n%v", c.cfg, len(lines), len(c.want), err)
			continue
		}
		for _, want := range c.want {
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
				t.Errorf("%T.Validate() = %q, want a line starting %q", c.cfg, err, want)
			}
		}
	}
}
