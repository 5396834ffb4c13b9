package middleware_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// TestTransactionalConfigErrorsNameTheField: a bad configuration of the
// transactional mode fails at construction, before any database work, with
// an error that names the field.
func TestTransactionalConfigErrorsNameTheField(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), pgtest.URL()) // connects lazily
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store, err := postgres.NewStore(pool, postgres.Config{CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	pub := gochannel.NewGoChannel(gochannel.Config{}, nil)
	defer pub.Close()
	cases := []struct {
		field string
		err   func() error
	}{
		{"pool is nil", func() error {
			_, err := middleware.TransactionalIdempotency(nil, store, middleware.IdempotencyConfig{})
			return err
		}},
		{"store is nil", func() error {
			_, err := middleware.TransactionalIdempotency(pool, nil, middleware.IdempotencyConfig{})
			return err
		}},
		{"IdempotencyConfig.IgnoreStoreErrors", func() error {
			_, err := middleware.TransactionalIdempotency(pool, store, middleware.IdempotencyConfig{IgnoreStoreErrors: true})
			return err
		}},
		{"IdempotencyConfig.StoreTimeout", func() error {
			_, err := middleware.TransactionalIdempotency(pool, store, middleware.IdempotencyConfig{StoreTimeout: -1})
			return err
		}},
		{"Config.Store must be a *postgres.Store", func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: memoryStore(t), Transactional: pool})
			return err
		}},
		{"Config.Store must be a *postgres.Store", func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, Transactional: pool})
			return err
		}},
	}
	for _, c := range cases {
		err := c.err()
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("want an error naming %s, got %v", c.field, err)
		}
		if !errors.Is(err, middleware.ErrInvalidConfig) {
			t.Errorf("%s: %v does not wrap ErrInvalidConfig", c.field, err)
		}
	}
	mws, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: store, Transactional: pool})
	if err != nil || len(mws) != 4 {
		t.Errorf("Defaults in the transactional mode: %d middlewares, %v", len(mws), err)
	}
}
