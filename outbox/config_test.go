package outbox_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/internal/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
)

func TestConfigValidate(t *testing.T) {
	if err := (outbox.Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	for field, cfg := range map[string]outbox.Config{
		"Schema":          {Schema: strings.Repeat("s", 64)},
		"Table":           {Table: strings.Repeat("t", 56)},
		"MaxMessageBytes": {MaxMessageBytes: -1},
	} {
		err := cfg.Validate()
		if !errors.Is(err, koto.ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want ErrInvalidConfig naming the field", field, err)
		}
	}
	if _, err := outbox.New(nil, outbox.Config{}); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("New(nil pool) = %v", err)
	}
	if _, err := outbox.New(pgtest.Pool(t), outbox.Config{Table: "\x00"}); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("New with a NUL in Table = %v", err)
	}
}

func TestForwarderConfigValidate(t *testing.T) {
	ok := broker.Config{Brokers: []string{"127.0.0.1:9092"}}
	if err := (outbox.ForwarderConfig{Broker: ok}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for field, cfg := range map[string]outbox.ForwarderConfig{
		"Broker":           {},
		"BatchSize":        {Broker: ok, BatchSize: -1},
		"PollInterval":     {Broker: ok, PollInterval: -time.Second},
		"TakeoverInterval": {Broker: ok, TakeoverInterval: -time.Second},
		"QueryTimeout":     {Broker: ok, QueryTimeout: -time.Second},
		"RetryBackoff":     {Broker: ok, RetryBackoff: koto.Backoff{Multiplier: 0.5}},
	} {
		err := cfg.Validate()
		if !errors.Is(err, koto.ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want ErrInvalidConfig naming the field", field, err)
		}
	}
	negative := outbox.ForwarderConfig{Broker: ok, RetryBackoff: koto.Backoff{MaxInterval: -time.Second}}
	if err := negative.Validate(); !errors.Is(err, koto.ErrInvalidConfig) || !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("negative RetryBackoff.MaxInterval: %v, want outbox's and middleware's ErrInvalidConfig", err)
	}
	if err := (outbox.ForwarderConfig{}).Validate(); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("no brokers: %v, want it to wrap koto.ErrInvalidConfig", err)
	}
	if _, err := outbox.NewForwarder(nil, outbox.ForwarderConfig{Broker: ok}); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("NewForwarder(nil) = %v", err)
	}
}
