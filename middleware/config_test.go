package middleware_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/internal/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// TestConfigErrorsNameTheField: a bad configuration fails at construction
// with an error that wraps ErrInvalidConfig and names the field.
func TestConfigErrorsNameTheField(t *testing.T) {
	pub := gochannel.NewGoChannel(gochannel.Config{}, nil)
	defer pub.Close()
	store := memoryStore(t)
	pool, err := pgxpool.New(context.Background(), pgtest.URL()) // connects lazily
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pgStore := postgresStoreIn(t, pool, "unused")
	cases := []struct {
		field string
		err   func() error
	}{
		{"publisher", func() error { _, err := middleware.DeadLetter(nil, middleware.DeadLetterConfig{}); return err }},
		{"DeadLetterConfig.MaxAttempts", func() error {
			_, err := middleware.DeadLetter(pub, middleware.DeadLetterConfig{MaxAttempts: -1})
			return err
		}},
		{"DeadLetterConfig.MaxElapsedTime", func() error {
			_, err := middleware.DeadLetter(pub, middleware.DeadLetterConfig{MaxElapsedTime: -1})
			return err
		}},
		{"DeadLetterConfig.Topic", func() error {
			_, err := middleware.DeadLetter(pub, middleware.DeadLetterConfig{Topic: "no spaces"})
			return err
		}},
		{"DeadLetterConfig.Backoff.Multiplier", func() error {
			_, err := middleware.DeadLetter(pub, middleware.DeadLetterConfig{Backoff: koto.Backoff{Multiplier: 0.5}})
			return err
		}},
		{"DeadLetterConfig.Backoff.MaxInterval", func() error {
			_, err := middleware.DeadLetter(pub, middleware.DeadLetterConfig{Backoff: koto.Backoff{InitialInterval: 20e9}})
			return err
		}},
		{"store", func() error { _, err := middleware.NewIdempotency(nil, middleware.IdempotencyConfig{}); return err }},
		{"IdempotencyConfig.StoreTimeout", func() error {
			_, err := middleware.NewIdempotency(store, middleware.IdempotencyConfig{StoreTimeout: -1})
			return err
		}},
		{"IdempotencyConfig.MarkBackoff.InitialInterval", func() error {
			_, err := middleware.NewIdempotency(store, middleware.IdempotencyConfig{MarkBackoff: koto.Backoff{InitialInterval: -1}})
			return err
		}},
		{"Config.Publisher", func() error { _, err := middleware.Defaults(middleware.Config{}); return err }},
		{"DeadLetterConfig.MaxAttempts", func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, DeadLetter: middleware.DeadLetterConfig{MaxAttempts: -2}})
			return err
		}},
		{"IdempotencyConfig.StoreTimeout", func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: store, Idempotency: middleware.IdempotencyConfig{StoreTimeout: -1}})
			return err
		}},
		{"IdempotencyConfig.MarkAfterAckTimeout", func() error {
			_, err := middleware.NewIdempotency(store, middleware.IdempotencyConfig{MarkAfterAckTimeout: -1})
			return err
		}},
		{"Config.Store must be a TransactionalStore", func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: store, Transactional: true})
			return err
		}},
		{"IdempotencyConfig.IgnoreStoreErrors", func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: pgStore, Transactional: true,
				Idempotency: middleware.IdempotencyConfig{IgnoreStoreErrors: true}})
			return err
		}},
		{"DeadLetterConfig.Backoff.InitialInterval", func() error {
			return middleware.DeadLetterConfig{Backoff: koto.Backoff{InitialInterval: -1}}.Validate()
		}},
		{"Backoff.Multiplier", func() error { return koto.Backoff{Multiplier: -1}.Validate() }},
		{"Backoff.MaxInterval is negative", func() error { return koto.Backoff{MaxInterval: -1}.Validate() }},
		{"IdempotencyConfig.MarkBackoff.MaxInterval", func() error {
			return middleware.Config{Publisher: pub, Idempotency: middleware.IdempotencyConfig{
				MarkBackoff: koto.Backoff{InitialInterval: time.Second, MaxInterval: time.Millisecond}}}.Validate()
		}},
		{"DeadLetterConfig.MaxElapsedTime", func() error {
			return middleware.Config{Publisher: pub, DeadLetter: middleware.DeadLetterConfig{MaxElapsedTime: -time.Second}}.Validate()
		}},
	}
	for _, c := range cases {
		err := c.err()
		if err == nil || !strings.Contains(err.Error(), c.field) || !errors.Is(err, koto.ErrInvalidConfig) {
			t.Errorf("want an error wrapping ErrInvalidConfig and naming %s, got %v", c.field, err)
		}
	}
}

func TestIdempotencyPanicsOnBadConfig(t *testing.T) {
	defer func() {
		if v := recover(); v == nil || !strings.Contains(v.(error).Error(), "store is nil") {
			t.Errorf("Idempotency(nil store) recovered %v, want a panic naming the store", v)
		}
	}()
	middleware.Idempotency(nil, middleware.IdempotencyConfig{})
}

func TestZeroConfigsAreValid(t *testing.T) {
	if err := (middleware.DeadLetterConfig{}).Validate(); err != nil {
		t.Errorf("DeadLetterConfig{}: %v", err)
	}
	if err := (middleware.IdempotencyConfig{}).Validate(); err != nil {
		t.Errorf("IdempotencyConfig{}: %v", err)
	}
	if err := (koto.Backoff{}).Validate(); err != nil {
		t.Errorf("Backoff{}: %v", err)
	}
}
