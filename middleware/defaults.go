package middleware

import (
	"context"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/telemetry"
)

// Config configures the chain that [Defaults] builds.
type Config struct {
	// Publisher publishes dead letters. Required.
	Publisher message.Publisher
	// Store remembers processed messages. Nil leaves idempotency out of
	// the chain, for handlers that must see every delivery.
	Store idempotency.Store
	// Transactional, when true, runs each delivery in a transaction of
	// Store's database: the chain gets [TransactionalIdempotency] in place
	// of [Idempotency], and Store must be a [TransactionalStore] (a
	// *postgres.Store). Give its pool a connection per partition the
	// router consumes, and some to spare. Idempotency.Outbox then sends
	// what the handler publishes through that database's outbox.
	Transactional bool
	// Logger receives the [Logging] lines. Nil means slog.Default().
	Logger *slog.Logger
	// Idempotency configures [Idempotency] or [TransactionalIdempotency].
	Idempotency IdempotencyConfig
	// DeadLetter configures [DeadLetter].
	DeadLetter DeadLetterConfig
	// Telemetry records the consumer spans and metrics, and the producer
	// spans of the dead letters (their publisher is decorated with
	// Telemetry.Publisher). Nil: telemetry.New with the zero
	// telemetry.Config, OpenTelemetry's global providers, which cost
	// nothing until the application sets them.
	Telemetry *telemetry.Telemetry
}

// Validate reports the first invalid field of c, its Idempotency and
// DeadLetter configs included, zero fields counting as their defaults,
// with an error that wraps [ErrInvalidConfig].
func (c Config) Validate() error {
	switch {
	case c.Publisher == nil:
		return invalid("Config.Publisher is nil; set it to the publisher that sends dead letters")
	case c.Transactional && c.Store == nil:
		return invalid("Config.Transactional is set but Config.Store is nil; set Store to the postgres.Store of the handler's database")
	case !c.Transactional && (c.Idempotency.Outbox != nil || c.Idempotency.LockKeys != nil):
		return invalid("IdempotencyConfig.Outbox or LockKeys is set, but only the transactional mode writes into an outbox; " +
			"set Config.Transactional (with Store the postgres.Store of the outbox's database), or unset them")
	case !c.Transactional && c.Idempotency.DeferClaim:
		return invalid("IdempotencyConfig.DeferClaim is set, but only the transactional mode has a claim to defer; " +
			"set Config.Transactional (with Store the postgres.Store of the handler's database), or unset it")
	case c.Transactional && c.Idempotency.IgnoreStoreErrors:
		return invalid("Config.Transactional is set with IdempotencyConfig.IgnoreStoreErrors, " +
			"but the transactional mode cannot run a handler without its database; unset IgnoreStoreErrors")
	}
	if _, ok := c.Store.(TransactionalStore); c.Transactional && !ok {
		return invalid("Config.Transactional is set, so Config.Store must be a TransactionalStore (a *postgres.Store), not %T", c.Store)
	}
	if err := c.Idempotency.Validate(); err != nil {
		return err
	}
	return c.DeadLetter.Validate()
}

// Chain is the middleware chain [Defaults] builds. Add its
// [Chain.Middlewares] to a router or a handler; Close it after the router
// and before the store.
type Chain struct {
	middlewares []message.HandlerMiddleware
	dedup       *IdempotentConsumer // nil unless check-handle-mark is in the chain
}

// Middlewares returns the chain, outermost first, for router.AddMiddleware
// or handler.AddMiddleware.
func (c *Chain) Middlewares() []message.HandlerMiddleware {
	return append([]message.HandlerMiddleware(nil), c.middlewares...)
}

// Close closes what the chain owns: the [IdempotentConsumer] of
// check-handle-mark, which waits for its pending marks (see there).
func (c *Chain) Close(ctx context.Context) error {
	if c.dedup == nil {
		return nil
	}
	return c.dedup.Close(ctx)
}

// Defaults returns the recommended middleware chain, outermost first:
//
//	Correlation, Telemetry, Logging, DeadLetter, Idempotency
//
// where Telemetry is Config.Telemetry's Middleware, or, with
// Config.Transactional, TransactionalIdempotency last; the package doc
// says why in this order. When cfg is invalid it returns an error that
// wraps [ErrInvalidConfig] and names the field.
func Defaults(cfg Config) (*Chain, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tel := cfg.Telemetry
	if tel == nil {
		var err error
		if tel, err = telemetry.New(telemetry.Config{}); err != nil {
			return nil, err
		}
	}
	deadLetter, err := DeadLetter(tel.Publisher(cfg.Publisher), cfg.DeadLetter)
	if err != nil {
		return nil, err
	}
	c := &Chain{middlewares: []message.HandlerMiddleware{Correlation, tel.Middleware, Logging(cfg.Logger), deadLetter}}
	switch {
	case cfg.Transactional:
		tx, err := TransactionalIdempotency(cfg.Store.(TransactionalStore), cfg.Idempotency)
		if err != nil {
			return nil, err
		}
		c.middlewares = append(c.middlewares, tx)
	case cfg.Store != nil:
		if c.dedup, err = NewIdempotency(cfg.Store, cfg.Idempotency); err != nil {
			return nil, err
		}
		c.middlewares = append(c.middlewares, c.dedup.Middleware)
	}
	return c, nil
}
