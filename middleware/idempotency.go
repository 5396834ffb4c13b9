package middleware

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/idempotency"
)

// Log attribute keys that [Idempotency] adds to the [Logging] line.
const (
	IdempotencyScopeAttr      = "idempotency_scope"
	IdempotencyKeyAttr        = "idempotency_key"
	IdempotencyStoreErrorAttr = "idempotency_store_error"
)

// IdempotencyConfig configures [Idempotency]. The zero value is the default.
type IdempotencyConfig struct {
	// Key returns the key of a message. Default [MessageKey]. An error makes
	// the message poison: it can never be processed safely.
	Key func(msg *message.Message) (string, error)
	// Scope returns the consumer a key belongs to, so that two handlers of
	// the same message do not skip each other's work: the store gets
	// idempotency.ScopedKey(scope, key). Default [HandlerName] (the
	// handler name is the consumer group). Return "" to store the bare key.
	Scope func(msg *message.Message) string
	// IgnoreStoreErrors, when true, prefers availability to deduplication:
	// a failed check runs the handler anyway and a failed mark is dropped,
	// both noted in the log line. By default (false) a store error is an
	// outage ([Transient]): the check is retried by [DeadLetter] (or the
	// message nacked), and a failed mark after a successful handler is
	// retried in place, with MarkBackoff, without running the handler again.
	IgnoreStoreErrors bool
	// StoreTimeout bounds each store call. Default 5 s.
	StoreTimeout time.Duration
	// MarkBackoff spaces the retries of a failed mark.
	MarkBackoff Backoff
	// OnDuplicate, if set, is called for every duplicate that is skipped,
	// to count them. Handlers run concurrently, and so may it.
	OnDuplicate func(msg *message.Message, scope, key string)
}

func (c *IdempotencyConfig) setDefaults() {
	if c.Key == nil {
		c.Key = MessageKey
	}
	if c.Scope == nil {
		c.Scope = HandlerName
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = 5 * time.Second
	}
	c.MarkBackoff.setDefaults()
}

// Validate reports the first invalid field of c, zero fields counting as
// their defaults. NewIdempotency calls it.
func (c IdempotencyConfig) Validate() error {
	c.setDefaults()
	if c.StoreTimeout < 0 {
		return fmt.Errorf("IdempotencyConfig.StoreTimeout is negative (%v)", c.StoreTimeout)
	}
	return c.MarkBackoff.validate("IdempotencyConfig.MarkBackoff")
}

// Idempotency skips messages that were already processed, with store:
// check, handle, mark. A message whose scoped key the store has is acked
// without calling the handler (outcome "duplicate", logged at debug with
// key and scope by [Logging], passed to cfg.OnDuplicate). Otherwise the
// handler runs, and only when it succeeds is the key marked: a failing
// handler marks nothing, so its retry or redelivery runs it again. Delivery
// stays at-least-once: a crash between handler and mark redelivers.
//
// Messages the handler returns are published by the router after the mark;
// if that publish fails the redelivery is skipped as a duplicate. Handlers
// that emit messages should publish them themselves, through this
// project's buses or outbox, before returning.
//
// Idempotency panics if store is nil or cfg is invalid; [NewIdempotency]
// returns the error instead. See [Defaults] for where it goes in the chain.
func Idempotency(store idempotency.Store, cfg IdempotencyConfig) message.HandlerMiddleware {
	m, err := NewIdempotency(store, cfg)
	if err != nil {
		panic(err)
	}
	return m
}

// NewIdempotency is [Idempotency] that returns a configuration error
// instead of panicking.
func NewIdempotency(store idempotency.Store, cfg IdempotencyConfig) (message.HandlerMiddleware, error) {
	if store == nil {
		return nil, errors.New("middleware: Idempotency: store is nil")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("middleware: Idempotency: %w", err)
	}
	d := &dedup{store: store, cfg: cfg}
	return d.middleware, nil
}

type dedup struct {
	store idempotency.Store
	cfg   IdempotencyConfig
}

func (d *dedup) middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		k, err := d.cfg.keyOf(msg)
		if err != nil {
			return nil, err
		}
		ctx := msg.Context()
		done, err := d.isProcessed(ctx, k.stored)
		if err != nil {
			return nil, err
		}
		if done {
			d.cfg.skipped(msg, k)
			return nil, nil
		}
		produced, err := h(msg)
		if err != nil {
			return produced, err
		}
		if err := d.mark(ctx, k.stored); err != nil {
			return nil, err
		}
		return produced, nil
	}
}

// isProcessed asks the store. A store error is an outage, or with
// IgnoreStoreErrors, noted and taken as "not processed".
func (d *dedup) isProcessed(ctx context.Context, key string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StoreTimeout)
	defer cancel()
	done, err := d.store.IsProcessed(ctx, key)
	if err == nil {
		return done, nil
	}
	err = fmt.Errorf("middleware: idempotency check: %w", err)
	if d.cfg.IgnoreStoreErrors {
		reportFrom(ctx).note(slog.String(IdempotencyStoreErrorAttr, err.Error()))
		return false, nil
	}
	return false, Transient(err)
}

// mark records key after the handler succeeded. A store error is retried
// in place, with backoff, until the mark succeeds or ctx ends, so the
// handler does not run twice because of an outage.
func (d *dedup) mark(ctx context.Context, key string) error {
	for n := 0; ; n++ {
		err := d.markOnce(ctx, key)
		if err == nil {
			return nil
		}
		err = fmt.Errorf("middleware: idempotency mark: %w", err)
		if d.cfg.IgnoreStoreErrors {
			reportFrom(ctx).note(slog.String(IdempotencyStoreErrorAttr, err.Error()))
			return nil
		}
		delay := d.cfg.MarkBackoff.delay(n)
		reportFrom(ctx).retry(retryNote{err: err, class: Outage, attempt: n + 1, delay: delay})
		if !sleep(ctx, delay) {
			return Transient(err)
		}
	}
}

func (d *dedup) markOnce(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StoreTimeout)
	defer cancel()
	return d.store.MarkProcessed(ctx, key)
}
