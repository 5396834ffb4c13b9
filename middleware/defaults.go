package middleware

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
)

// Config configures the chain that [Defaults] builds.
type Config struct {
	// Publisher publishes dead letters. Required.
	Publisher message.Publisher
	// Store remembers processed messages. Nil leaves [Idempotency] out of
	// the chain, for handlers that must see every delivery.
	Store idempotency.Store
	// Transactional, when set, runs each delivery in a transaction on this
	// pool: the chain gets [TransactionalIdempotency] in place of
	// [Idempotency], and the handler finds the transaction with
	// postgres.TxFromContext(msg.Context()). Store must then be the
	// *postgres.Store of the same database. Give the pool a connection per
	// partition the router consumes, and some to spare.
	Transactional *pgxpool.Pool
	// Logger receives the [Logging] lines. Nil means slog.Default().
	Logger *slog.Logger
	// Idempotency configures [Idempotency] or [TransactionalIdempotency].
	Idempotency IdempotencyConfig
	// DeadLetter configures [DeadLetter].
	DeadLetter DeadLetterConfig
}

// Defaults returns the recommended middleware chain, outermost first, to
// pass to router.AddMiddleware or handler.AddMiddleware:
//
//	Correlation, Logging, DeadLetter, Idempotency
//
// or, with Config.Transactional, TransactionalIdempotency last.
//
// Correlation comes first so that everything inside, the log line included,
// sees the correlation ID. Logging wraps the rest so that it times the
// whole delivery and logs its final outcome. DeadLetter wraps Idempotency so
// that a store outage reaches it as an outage (retried, never
// dead-lettered) and so that a dead-lettered message is never marked
// processed: replaying it from the dead-letter topic, with the same UUID,
// runs the handler again. Idempotency is innermost so that only a handler
// that succeeded is marked, and each retry checks again; in the
// transactional mode, so that each retry is a transaction of its own, whose
// claim rolls back with the failed attempt.
//
// When cfg is invalid it returns an error that wraps [ErrInvalidConfig]
// and names the field.
func Defaults(cfg Config) ([]message.HandlerMiddleware, error) {
	chain, err := cfg.chain()
	if err != nil && !errors.Is(err, ErrInvalidConfig) {
		err = fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return chain, err
}

// chain builds the chain of [Defaults].
func (c Config) chain() ([]message.HandlerMiddleware, error) {
	if c.Publisher == nil {
		return nil, invalid("Defaults: Config.Publisher is nil; set it to the publisher that sends dead letters")
	}
	deadLetter, err := DeadLetter(c.Publisher, c.DeadLetter)
	if err != nil {
		return nil, err
	}
	chain := []message.HandlerMiddleware{Correlation, Logging(c.Logger), deadLetter}
	if c.Store == nil && c.Transactional == nil {
		return chain, nil
	}
	dedup, err := c.idempotency()
	if err != nil {
		return nil, err
	}
	return append(chain, dedup), nil
}

// idempotency builds the idempotency middleware that cfg asks for.
func (c Config) idempotency() (message.HandlerMiddleware, error) {
	if c.Transactional == nil {
		return NewIdempotency(c.Store, c.Idempotency)
	}
	store, ok := c.Store.(*postgres.Store)
	if !ok {
		return nil, invalid("Defaults: Config.Transactional is set, so Config.Store must be a *postgres.Store of the same database, not %T", c.Store)
	}
	return TransactionalIdempotency(c.Transactional, store, c.Idempotency)
}
