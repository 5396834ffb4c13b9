package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/pgtest"
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
		{"long schema", postgres.Config{Schema: strings.Repeat("s", 64)}, "Schema", "at most 63 bytes"},
		{"long table", postgres.Config{Table: strings.Repeat("t", 48)}, "Table", "at most 47 bytes"},
		{"NUL", postgres.Config{Table: "a\x00b"}, "Table", "NUL"},
		{"bad UTF-8", postgres.Config{Schema: "a\xffb"}, "Schema", "UTF-8"},
		{"negative window", postgres.Config{Window: -time.Second}, "Window", "at least 1ms"},
		{"tiny window", postgres.Config{Window: time.Microsecond}, "Window", "at least 1ms"},
		{"negative batch", postgres.Config{CleanupBatchSize: -1}, "CleanupBatchSize", "positive"},
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
			if !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), c.hint) {
				t.Fatalf("error %q does not name %s and say %q", err, c.field, c.hint)
			}
		})
	}
	if _, err := postgres.NewStore(nil, postgres.Config{}); !errors.Is(err, koto.ErrInvalidConfig) {
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

func TestValidateNamesEveryField(t *testing.T) {
	err := postgres.Config{
		Schema:           strings.Repeat("s", 64),
		Table:            "t\x00",
		Window:           -time.Second,
		CleanupBatchSize: -1,
	}.Validate()
	if err == nil {
		t.Fatal("Validate accepted an invalid Config")
	}
	for _, field := range []string{"Schema", "Table", "Window", "CleanupBatchSize"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("Validate does not name %s: %v", field, err)
		}
	}
	if !errors.Is(err, koto.ErrInvalidConfig) {
		t.Fatalf("%v does not wrap ErrInvalidConfig", err)
	}
}
