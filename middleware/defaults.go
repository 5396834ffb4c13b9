package middleware

import (
	"context"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/internal/config"
	"github.com/koto-dev/watermill-koto/telemetry"
)

// Config configures the chain that [Defaults] builds.
type Config struct {
	// Publisher publishes dead letters. Required.
	Publisher message.Publisher
	// Store remembers processed messages. Nil leaves idempotency out of
	// the chain, for handlers that must see every delivery. With
	// Idempotency.Transactional it is the store of the handler's database
	// (a *postgres.Store): give its pool a connection per message handled
	// at once, and some to spare.
	Store idempotency.Store
	// Logger receives the [Logging] lines. Nil means slog.Default().
	Logger *slog.Logger
	// Idempotency configures [Idempotency].
	Idempotency IdempotencyConfig
	// DeadLetter configures [DeadLetter].
	DeadLetter DeadLetterConfig
	// Telemetry records the consumer spans and metrics, and the producer
	// spans of the dead letters. Nil: telemetry.New with the zero
	// telemetry.Config, OpenTelemetry's global providers, which cost
	// nothing until the application sets them.
	Telemetry *telemetry.Telemetry
}

// Validate reports every invalid field of c, its Idempotency and
// DeadLetter configs included, zero fields counting as their defaults, in
// one error that wraps koto.ErrInvalidConfig.
func (c Config) Validate() error {
	p := config.For("middleware.Config")
	if c.Publisher == nil {
		p.Add("Publisher", "is nil; set it to the publisher that sends dead letters")
	}
	if c.Store == nil && c.Idempotency.Transactional {
		p.Add("Store", "is nil but Idempotency.Transactional is set; set Store to the postgres.Store of the handler's database")
	}
	if _, ok := c.Store.(idempotency.TxStore); c.Store != nil && c.Idempotency.Transactional && !ok {
		p.Add("Store", "is a %T, but Idempotency.Transactional needs an idempotency.TxStore (a *postgres.Store)", c.Store)
	}
	p.Nest("Idempotency", c.Idempotency.Validate())
	p.Nest("DeadLetter", c.DeadLetter.Validate())
	return p.Err()
}

// Chain is the middleware chain [Defaults] builds. Add its
// [Chain.Middlewares] to a router or a handler; Close it after the router
// and before the store.
type Chain struct {
	middlewares []message.HandlerMiddleware
	marks       *checkHandleMark // nil unless check-handle-mark is in the chain
	tel         *telemetry.Telemetry
}

// Middlewares returns the chain, outermost first, for router.AddMiddleware
// or handler.AddMiddleware.
func (c *Chain) Middlewares() []message.HandlerMiddleware {
	return append([]message.HandlerMiddleware(nil), c.middlewares...)
}

// Close refuses new deliveries (an outage wrapping [ErrClosed]) and waits
// for the marks that check-handle-mark makes after an ack. If ctx ends
// first, it gives them up (a later duplicate of those messages would run
// the handler again) and returns ctx's error. Calling it twice is fine.
func (c *Chain) Close(ctx context.Context) error {
	if c.marks == nil {
		return nil
	}
	return c.marks.Close(ctx)
}

// Defaults returns the recommended middleware chain, outermost first:
//
//	Correlation, Telemetry, Logging, DeadLetter, Idempotency
//
// where Telemetry is Config.Telemetry's Middleware; the package doc says
// why in this order. An invalid cfg is an error that wraps
// koto.ErrInvalidConfig and names each field.
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
	c := &Chain{middlewares: []message.HandlerMiddleware{Correlation, tel.Middleware, Logging(cfg.Logger), deadLetter}, tel: tel}
	if cfg.Store != nil {
		m, err := newIdempotency(cfg.Store, cfg.Idempotency)
		if err != nil {
			return nil, err
		}
		c.middlewares, c.marks = append(c.middlewares, m.middleware), m.marks
	}
	return c, nil
}
