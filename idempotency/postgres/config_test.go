package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

func TestNewStoreDefaults(t *testing.T) {
	s, err := postgres.NewStore(pgtest.LazyPool(t), postgres.Config{CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Window() != idempotency.DefaultWindow || s.Table() != "koto.processed_messages" {
		t.Fatalf("zero Config gave window %v, table %s", s.Window(), s.Table())
	}
}

func TestNewStoreRejectsInvalidConfig(t *testing.T) {
	pool := pgtest.LazyPool(t)
	for _, c := range []struct {
		name  string
		cfg   postgres.Config
		field string
		hint  string
	}{
		{"long schema", postgres.Config{Schema: strings.Repeat("s", 64)}, "postgres.Config.Schema", "at most 63 bytes"},
		{"long table", postgres.Config{Table: strings.Repeat("t", 48)}, "postgres.Config.Table", "at most 47 bytes"},
		{"NUL", postgres.Config{Table: "a\x00b"}, "postgres.Config.Table", "NUL"},
		{"bad UTF-8", postgres.Config{Schema: "a\xffb"}, "postgres.Config.Schema", "UTF-8"},
		{"negative window", postgres.Config{Window: -time.Second}, "postgres.Config.Window", "at least 1ms"},
		{"tiny window", postgres.Config{Window: time.Microsecond}, "postgres.Config.Window", "at least 1ms"},
		{"negative batch", postgres.Config{CleanupBatchSize: -1}, "postgres.Config.CleanupBatchSize", "positive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := postgres.NewStore(pool, c.cfg)
			if err == nil {
				s.Close()
				t.Fatal("NewStore accepted it")
			}
			if !errors.Is(err, koto.ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			if !strings.HasPrefix(err.Error(), "invalid configuration: "+c.field+" ") || !strings.Contains(err.Error(), c.hint) {
				t.Fatalf("error %q does not name %s and say %q", err, c.field, c.hint)
			}
		})
	}
	if _, err := postgres.NewStore(nil, postgres.Config{}); !errors.Is(err, koto.ErrInvalidConfig) ||
		err.Error() != "invalid configuration: postgres.NewStore got a nil pool; pass a connected *pgxpool.Pool" {
		t.Fatalf("NewStore(nil pool): %v", err)
	}
	s, err := postgres.NewStore(pool, postgres.Config{Table: strings.Repeat("t", 47), CleanupInterval: -1})
	if err != nil {
		t.Fatalf("a 47-byte table name: %v", err)
	}
	s.Close()
}

func TestValidateZeroMeansDefaults(t *testing.T) {
	if err := (postgres.Config{}).Validate(); err != nil {
		t.Fatalf("Config{}.Validate() = %v, want nil: zero fields are defaults", err)
	}
}

// TestValidateNamesEveryField: Validate reports every invalid field at
// once, one a line, each with what to change.
func TestValidateNamesEveryField(t *testing.T) {
	err := postgres.Config{
		Schema:           strings.Repeat("s", 64),
		Table:            "t\x00",
		Window:           -time.Second,
		CleanupBatchSize: -1,
	}.Validate()
	want := strings.Join([]string{
		`invalid configuration: postgres.Config.Schema "` + strings.Repeat("s", 64) + `" is 64 bytes; shorten it to at most 63 bytes`,
		`invalid configuration: postgres.Config.Table "t\x00" contains a NUL byte; remove it`,
		"invalid configuration: postgres.Config.Window is -1s; set it to at least 1ms, or 0 for the default (24h0m0s)",
		"invalid configuration: postgres.Config.CleanupBatchSize is -1; set a positive number of rows, or 0 for the default (5000)",
	}, "\n")
	if err == nil || err.Error() != want {
		t.Fatalf("Validate:\n got %v\nwant %s", err, want)
	}
	if !errors.Is(err, koto.ErrInvalidConfig) {
		t.Fatalf("%v does not wrap ErrInvalidConfig", err)
	}
}
