package cqrs_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// newPostgresStore returns a PostgreSQL store on a schema of the test's
// own, without background cleanup, closed when the test ends, and its pool
// and schema.
func newPostgresStore(t *testing.T) (*postgres.Store, *pgxpool.Pool, string) {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	store, err := postgres.NewStore(pool, postgres.Config{Schema: schema, CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store, pool, schema
}

// newService returns a Service that cfg configures, with the test's
// brokers, logger and fast retries filled in, closed when the test ends.
func newService(t *testing.T, brokers []string, cfg cqrs.ServiceConfig) *cqrs.Service {
	t.Helper()
	cfg.Broker.Brokers = brokers
	cfg.Logger = kototest.Logger(slog.LevelError)
	if cfg.DeadLetter.Backoff.InitialInterval == 0 {
		cfg.DeadLetter.Backoff.InitialInterval = time.Millisecond
		cfg.DeadLetter.Backoff.MaxInterval = 10 * time.Millisecond
	}
	svc, err := cqrs.NewService(cfg)
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	closeAtEnd(t, svc)
	return svc
}

// closeAtEnd closes svc when the test ends, giving its marks after an ack
// kototest.DefaultTimeout.
func closeAtEnd(t testing.TB, svc *cqrs.Service) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
		defer cancel()
		_ = svc.Close(ctx)
	})
}

func newDispatcher(t *testing.T, pub message.Publisher, brokers []string, cfg cqrs.CommandDispatcherConfig) *cqrs.CommandDispatcher {
	t.Helper()
	cfg.Broker.Brokers = brokers
	cfg.Logger = kototest.Logger(slog.LevelError)
	d, err := cqrs.NewCommandDispatcher(pub, cfg)
	if err != nil {
		t.Fatalf("NewCommandDispatcher: %v", err)
	}
	ctx := kototest.Context(t)
	if err := d.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// nackedErrors adds an outermost middleware to r and returns the errors it
// sees, what the router nacks; it keeps the first 8.
func nackedErrors(r *message.Router) <-chan error {
	errs := make(chan error, 8)
	r.AddMiddleware(func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			out, err := h(msg)
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
			return out, err
		}
	})
	return errs
}
