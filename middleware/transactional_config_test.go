package middleware_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// TestTransactionalConfigErrorsNameTheField: a bad configuration of the
// transactional mode fails at construction, before any database work, with
// an error that names the field.
func TestTransactionalConfigErrorsNameTheField(t *testing.T) {
	pool := pgtest.LazyPool(t)
	store := postgresStoreIn(t, pool, "koto")
	pub := gochannel.NewGoChannel(gochannel.Config{}, nil)
	defer pub.Close()
	transactional := func(s idempotency.Store, cfg middleware.IdempotencyConfig) func() error {
		cfg.Transactional = true
		return func() error { _, err := middleware.Idempotency(s, cfg); return err }
	}
	cases := []struct {
		field string
		err   func() error
	}{
		{"middleware.IdempotencyConfig has no store", transactional(nil, middleware.IdempotencyConfig{})},
		{"middleware.IdempotencyConfig.IgnoreStoreErrors", transactional(store, middleware.IdempotencyConfig{IgnoreStoreErrors: true})},
		{"middleware.IdempotencyConfig.StoreTimeout", transactional(store, middleware.IdempotencyConfig{StoreTimeout: -1})},
		{"middleware.IdempotencyConfig.Transactional is set, so the store must be an idempotency.TxStore (a *postgres.Store), not struct",
			transactional(struct{ idempotency.Store }{store}, middleware.IdempotencyConfig{DeferClaim: true})},
		{"middleware.IdempotencyConfig.Transactional is not set, but Outbox, LockKeys or DeferClaim is", func() error {
			_, err := middleware.Idempotency(memoryStore(t), middleware.IdempotencyConfig{DeferClaim: true})
			return err
		}},
		{"middleware.Config.Idempotency.Transactional is not set, but Outbox, LockKeys or DeferClaim is", func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: store, Idempotency: middleware.IdempotencyConfig{DeferClaim: true}})
			return err
		}},
		{"middleware.Config.Store is a *idempotency.MemoryStore, but Idempotency.Transactional needs an idempotency.TxStore", func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: memoryStore(t), Idempotency: middleware.IdempotencyConfig{Transactional: true}})
			return err
		}},
		{"middleware.Config.Store is nil", func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, Idempotency: middleware.IdempotencyConfig{Transactional: true}})
			return err
		}},
	}
	for _, c := range cases {
		err := c.err()
		if err == nil || !strings.Contains(err.Error(), "invalid configuration: "+c.field) {
			t.Errorf("want an error naming %s, got %v", c.field, err)
		}
		if !errors.Is(err, koto.ErrInvalidConfig) {
			t.Errorf("%s: %v does not wrap ErrInvalidConfig", c.field, err)
		}
	}
	chain, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: store, Idempotency: middleware.IdempotencyConfig{Transactional: true}})
	if err != nil || len(chain.Middlewares()) != 5 {
		t.Fatalf("Defaults in the transactional mode: %v", err)
	}
	if err := chain.Close(context.Background()); err != nil {
		t.Errorf("Close of a transactional chain: %v", err)
	}
}
