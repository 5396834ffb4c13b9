package middleware_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/koto-dev/watermill-koto/internal/pgtest"
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
	cases := []struct {
		field string
		err   func() error
	}{
		{"store is nil", func() error {
			_, err := middleware.TransactionalIdempotency(nil, middleware.IdempotencyConfig{})
			return err
		}},
		{"IdempotencyConfig.IgnoreStoreErrors", func() error {
			_, err := middleware.TransactionalIdempotency(store, middleware.IdempotencyConfig{IgnoreStoreErrors: true})
			return err
		}},
		{"IdempotencyConfig.StoreTimeout", func() error {
			_, err := middleware.TransactionalIdempotency(store, middleware.IdempotencyConfig{StoreTimeout: -1})
			return err
		}},
		{"IdempotencyConfig.DeferClaim needs a DeferringStore", func() error {
			notDeferring := struct{ middleware.TransactionalStore }{store}
			_, err := middleware.TransactionalIdempotency(notDeferring, middleware.IdempotencyConfig{DeferClaim: true})
			return err
		}},
		{"Idempotency: IdempotencyConfig.DeferClaim", func() error {
			_, err := middleware.NewIdempotency(memoryStore(t), middleware.IdempotencyConfig{DeferClaim: true})
			return err
		}},
		{"IdempotencyConfig.DeferClaim is set, but only the transactional mode", func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: store, Idempotency: middleware.IdempotencyConfig{DeferClaim: true}})
			return err
		}},
		{"Config.Store must be a TransactionalStore", func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: memoryStore(t), Transactional: true})
			return err
		}},
		{"Config.Store is nil", func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, Transactional: true})
			return err
		}},
	}
	for _, c := range cases {
		err := c.err()
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("want an error naming %s, got %v", c.field, err)
		}
		if !errors.Is(err, koto.ErrInvalidConfig) {
			t.Errorf("%s: %v does not wrap ErrInvalidConfig", c.field, err)
		}
	}
	chain, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: store, Transactional: true})
	if err != nil || len(chain.Middlewares()) != 5 {
		t.Fatalf("Defaults in the transactional mode: %v", err)
	}
	if err := chain.Close(context.Background()); err != nil {
		t.Errorf("Close of a transactional chain: %v", err)
	}
}
