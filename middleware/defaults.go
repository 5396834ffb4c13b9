package middleware

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/idempotency"
)

// Config configures the chain that [Defaults] builds.
type Config struct {
	// Publisher publishes dead letters. Required.
	Publisher message.Publisher
	// Store remembers processed messages. Nil leaves [Idempotency] out of
	// the chain, for handlers that must see every delivery.
	Store idempotency.Store
	// Logger receives the [Logging] lines. Nil means slog.Default().
	Logger *slog.Logger
	// Idempotency configures [Idempotency].
	Idempotency IdempotencyConfig
	// DeadLetter configures [DeadLetter].
	DeadLetter DeadLetterConfig
}

// Defaults returns the recommended middleware chain, outermost first, to
// pass to router.AddMiddleware or handler.AddMiddleware:
//
//	Correlation, Logging, DeadLetter, Idempotency
//
// Correlation comes first so that everything inside, the log line included,
// sees the correlation ID. Logging wraps the rest so that it times the
// whole delivery and logs its final outcome. DeadLetter wraps Idempotency so
// that a store outage reaches it as an outage (retried, never
// dead-lettered) and so that a dead-lettered message is never marked
// processed: replaying it from the dead-letter topic, with the same UUID,
// runs the handler again. Idempotency is innermost so that only a handler
// that succeeded is marked, and each retry checks again.
//
// It returns an error that names the field when cfg is invalid.
func Defaults(cfg Config) ([]message.HandlerMiddleware, error) {
	if cfg.Publisher == nil {
		return nil, errors.New("middleware: Defaults: Config.Publisher is nil")
	}
	deadLetter, err := DeadLetter(cfg.Publisher, cfg.DeadLetter)
	if err != nil {
		return nil, fmt.Errorf("middleware: Defaults: %w", err)
	}
	chain := []message.HandlerMiddleware{Correlation, Logging(cfg.Logger), deadLetter}
	if cfg.Store == nil {
		return chain, nil
	}
	dedup, err := NewIdempotency(cfg.Store, cfg.Idempotency)
	if err != nil {
		return nil, fmt.Errorf("middleware: Defaults: %w", err)
	}
	return append(chain, dedup), nil
}
