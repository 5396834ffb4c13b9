package outbox_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
)

// wantConfigErr checks that err wraps ErrInvalidConfig and that its
// lines are exactly want.
func wantConfigErr(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if !errors.Is(err, koto.ErrInvalidConfig) || err.Error() != strings.Join(want, "\n") {
		t.Errorf("%s:\n got %v\nwant %s\nwrapping ErrInvalidConfig", what, err, strings.Join(want, "\n"))
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (outbox.Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	for field, cfg := range map[string]outbox.Config{
		"Schema":          {Schema: strings.Repeat("s", 64)},
		"Table":           {Table: strings.Repeat("t", 54)},
		"MaxMessageBytes": {MaxMessageBytes: -1},
	} {
		err := cfg.Validate()
		if !errors.Is(err, koto.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "invalid configuration: outbox.Config."+field+" ") {
			t.Errorf("%s: %v, want ErrInvalidConfig naming the field", field, err)
		}
	}
	wantConfigErr(t, "every field", outbox.Config{Schema: strings.Repeat("s", 64), Table: strings.Repeat("t", 54), MaxMessageBytes: -1}.Validate(),
		`invalid configuration: outbox.Config.Schema "`+strings.Repeat("s", 64)+`" is 64 bytes; shorten it to at most 63 bytes`,
		`invalid configuration: outbox.Config.Table "`+strings.Repeat("t", 54)+`" is 54 bytes; shorten it to at most 53 bytes`,
		"invalid configuration: outbox.Config.MaxMessageBytes is -1; set a positive size in bytes, or 0 for 1000000")
	_, err := outbox.New(nil, outbox.Config{})
	wantConfigErr(t, "New(nil pool)", err, "invalid configuration: outbox.New got a nil pool; pass a connected *pgxpool.Pool")
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
		"Broker.Brokers":          {},
		"BatchSize":               {Broker: ok, BatchSize: -1},
		"PollInterval":            {Broker: ok, PollInterval: -time.Second},
		"TakeoverInterval":        {Broker: ok, TakeoverInterval: -time.Second},
		"QueryTimeout":            {Broker: ok, QueryTimeout: -time.Second},
		"RetryBackoff.Multiplier": {Broker: ok, RetryBackoff: koto.Backoff{Multiplier: 0.5}},
	} {
		err := cfg.Validate()
		if !errors.Is(err, koto.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "invalid configuration: outbox.ForwarderConfig."+field+" ") {
			t.Errorf("%s: %v, want ErrInvalidConfig naming the field", field, err)
		}
	}
	every := outbox.ForwarderConfig{
		Broker:    broker.Config{Brokers: []string{"x"}},
		BatchSize: -1, PollInterval: -time.Second, TakeoverInterval: -time.Second, QueryTimeout: -time.Second,
		RetryBackoff: koto.Backoff{Multiplier: 0.5, MaxInterval: -time.Second},
	}
	wantConfigErr(t, "every field, the broker's and the backoff's included", every.Validate(),
		`invalid configuration: outbox.ForwarderConfig.Broker.Brokers[0] is "x"; want host:port, e.g. "127.0.0.1:9092"`,
		"invalid configuration: outbox.ForwarderConfig.BatchSize is -1; set a positive number of rows, or 0 for 1000",
		"invalid configuration: outbox.ForwarderConfig.PollInterval is -1s; set a positive duration, or 0 for 1s",
		"invalid configuration: outbox.ForwarderConfig.TakeoverInterval is -1s; set a positive duration, or 0 for 1s",
		"invalid configuration: outbox.ForwarderConfig.QueryTimeout is -1s; set a positive duration, or 0 for 10s",
		"invalid configuration: outbox.ForwarderConfig.RetryBackoff.MaxInterval is negative (-1s); use 0 for the default (10s) or a duration of at least InitialInterval",
		"invalid configuration: outbox.ForwarderConfig.RetryBackoff.Multiplier (0.5) is less than 1; use 0 for the default (2) or a value of at least 1")
	_, err := outbox.NewForwarder(nil, outbox.ForwarderConfig{Broker: ok})
	wantConfigErr(t, "NewForwarder(nil)", err, "invalid configuration: outbox.NewForwarder got a nil *Outbox; pass the one from outbox.New")
}
