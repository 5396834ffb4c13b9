package middleware

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/internal/logattr"
	"github.com/koto-dev/watermill-koto/internal/retry"
	"github.com/koto-dev/watermill-koto/telemetry"
)

// Defaults of [IdempotencyConfig].
const (
	DefaultStoreTimeout        = 5 * time.Second
	DefaultMarkAfterAckTimeout = time.Minute
)

// IdempotencyConfig configures [Idempotency] and [TransactionalIdempotency].
// The zero value is the default.
type IdempotencyConfig struct {
	// Key returns the key of a message. Default [MessageKey]. An error makes
	// the message poison: it can never be processed safely.
	Key func(msg *message.Message) (string, error)
	// Scope returns the consumer a key belongs to: the store gets
	// idempotency.ScopedKey(scope, key). Default [HandlerName]. Return ""
	// to store the bare key.
	Scope func(msg *message.Message) string
	// IgnoreStoreErrors, when true, prefers availability to deduplication:
	// a failed check runs the handler anyway and a failed mark is dropped,
	// both noted in the log line. By default a store error is an outage.
	IgnoreStoreErrors bool
	// StoreTimeout bounds each store call. Default [DefaultStoreTimeout].
	StoreTimeout time.Duration
	// MarkBackoff spaces the retries of a failed mark.
	MarkBackoff Backoff
	// MarkAfterAckTimeout bounds the wait for the ack of a message whose
	// handler returned messages, and then the retries of its mark. Default
	// [DefaultMarkAfterAckTimeout].
	MarkAfterAckTimeout time.Duration
	// OnDuplicate, if set, is called for every duplicate that is skipped,
	// to count them. Handlers run concurrently, and so may it.
	OnDuplicate func(msg *message.Message, scope, key string)
	// Outbox, in the transactional mode only, is the transactional outbox
	// of the store's database (an *outbox.Outbox): the handler's
	// transaction is bound to it, and the messages the handler returns are
	// written into it, so that they commit with the handler's writes (see
	// the package doc). Nil: the handler must not return messages.
	Outbox TxOutbox
	// LockKeys, in the transactional mode with an Outbox only, returns the
	// keys to lock before the claim, the partition keys of the messages
	// the handler will write into the outbox, so that they reach Kafka in
	// the order their transactions commit. An error makes the message
	// poison.
	LockKeys func(msg *message.Message) ([]string, error)
	// DeferClaim, in the transactional mode only, sends BEGIN and the
	// claim with the handler's first statement instead of in a round trip
	// of their own before the handler: a round trip less per message, but
	// the handler starts before the claim is decided, so its code before
	// its first statement also runs for a duplicate (see the package doc).
	// By default the claim comes first and a duplicate never reaches the
	// handler.
	DeferClaim bool
}

func (c *IdempotencyConfig) setDefaults() {
	if c.Key == nil {
		c.Key = MessageKey
	}
	if c.Scope == nil {
		c.Scope = HandlerName
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = DefaultStoreTimeout
	}
	if c.MarkAfterAckTimeout == 0 {
		c.MarkAfterAckTimeout = DefaultMarkAfterAckTimeout
	}
	c.MarkBackoff.setDefaults()
}

// Validate reports the first invalid field of c, its MarkBackoff included,
// zero fields counting as their defaults, with an error that wraps
// [ErrInvalidConfig].
func (c IdempotencyConfig) Validate() error {
	c.setDefaults()
	switch {
	case c.StoreTimeout < 0:
		return invalid("IdempotencyConfig.StoreTimeout is negative (%v); use 0 for the default (%v) or a positive duration", c.StoreTimeout, DefaultStoreTimeout)
	case c.MarkAfterAckTimeout < 0:
		return invalid("IdempotencyConfig.MarkAfterAckTimeout is negative (%v); use 0 for the default (%v) or a positive duration", c.MarkAfterAckTimeout, DefaultMarkAfterAckTimeout)
	}
	return c.MarkBackoff.validate("IdempotencyConfig.MarkBackoff")
}

// Idempotency skips messages that were already processed: check, handle,
// mark, as the package doc describes. It is [NewIdempotency] without an
// owner for the marks it makes after an ack, which end on their own within
// twice MarkAfterAckTimeout. Where they must land before the store closes,
// use [NewIdempotency] (or [Defaults]) and Close it between the router and
// the store.
//
// Idempotency panics if store is nil or cfg is invalid; [NewIdempotency]
// returns the error instead.
func Idempotency(store idempotency.Store, cfg IdempotencyConfig) message.HandlerMiddleware {
	m, err := NewIdempotency(store, cfg)
	if err != nil {
		panic(err)
	}
	return m.Middleware
}

// NewIdempotency returns the [IdempotentConsumer] for store and cfg, or a
// configuration error, which wraps [ErrInvalidConfig].
func NewIdempotency(store idempotency.Store, cfg IdempotencyConfig) (*IdempotentConsumer, error) {
	if store == nil {
		return nil, invalid("Idempotency: the store is nil; pass an idempotency.Store, such as idempotency.NewMemoryStore or postgres.NewStore")
	}
	if cfg.Outbox != nil || cfg.LockKeys != nil {
		return nil, invalid("Idempotency: IdempotencyConfig.Outbox or LockKeys is set, but only the transactional mode " +
			"writes into an outbox; use TransactionalIdempotency (Config.Transactional), or unset them and publish with outbox.Transact in the handler")
	}
	if cfg.DeferClaim {
		return nil, invalid("Idempotency: IdempotencyConfig.DeferClaim is set, but only the transactional mode has a claim to defer; " +
			"use TransactionalIdempotency (Config.Transactional), or unset it")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	life, abort := context.WithCancel(context.Background())
	return &IdempotentConsumer{store: store, cfg: cfg, pending: map[string][]chan struct{}{}, life: life, abort: abort}, nil
}

// IdempotentConsumer is the check-handle-mark middleware ([Middleware]) with
// an owner for the marks it makes after an ack ([Close]). Make it with
// [NewIdempotency]; close it after the router and before the store.
//
// [Middleware]: IdempotentConsumer.Middleware
// [Close]: IdempotentConsumer.Close
type IdempotentConsumer struct {
	store idempotency.Store
	cfg   IdempotencyConfig

	closed atomic.Bool // set under mu
	mu     sync.Mutex
	// pending holds, per stored key, a channel closed when the delivery that
	// waits for its ack to mark the key (markOnAck) is done.
	pending map[string][]chan struct{}
	marks   sync.WaitGroup // the goroutines of markOnAck

	life  context.Context // ends when Close gives up on the pending marks
	abort context.CancelFunc
}

// Middleware is the router middleware: it skips a message whose scoped key
// the store has, and marks the key of a message whose handler succeeded.
func (d *IdempotentConsumer) Middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		k, err := d.cfg.keyOf(msg)
		if err != nil {
			return nil, err
		}
		if d.closed.Load() {
			return nil, Outage(fmt.Errorf("middleware: idempotency: %w", ErrClosed))
		}
		ctx := msg.Context()
		if err := d.awaitPending(ctx, k.stored); err != nil {
			return nil, err
		}
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
		if len(produced) > 0 {
			if err := d.markOnAck(ctx, msg, k.stored); err != nil {
				return nil, err
			}
			return produced, nil
		}
		if err := d.mark(ctx, k.stored); err != nil {
			if !d.cfg.IgnoreStoreErrors {
				return nil, err
			}
			reportFrom(ctx).note(slog.String(logattr.IdempotencyStoreError, err.Error()))
		}
		return produced, nil
	}
}

// isProcessed asks the store. A store error is an outage, or with
// IgnoreStoreErrors, noted and taken as "not processed".
func (d *IdempotentConsumer) isProcessed(ctx context.Context, key string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StoreTimeout)
	defer cancel()
	record := telemetry.StoreCall(ctx, telemetry.StoreCheck)
	done, err := d.store.IsProcessed(ctx, key)
	record(err)
	if err == nil {
		return done, nil
	}
	err = fmt.Errorf("middleware: idempotency check: %w", err)
	if d.cfg.IgnoreStoreErrors {
		reportFrom(ctx).note(slog.String(logattr.IdempotencyStoreError, err.Error()))
		return false, nil
	}
	return false, Outage(err)
}

// mark records key after the handler succeeded. A store error is retried
// in place, with MarkBackoff, until the mark succeeds or ctx ends, so the
// handler does not run twice because of an outage; with IgnoreStoreErrors
// it is returned at once. Each attempt runs to its StoreTimeout even when
// ctx ends meanwhile: a router that closes cancels its messages' contexts,
// and a mark cut short then would make the redelivery run the handler
// again.
func (d *IdempotentConsumer) mark(ctx context.Context, key string) error {
	return retry.Do(ctx, d.cfg.MarkBackoff.Delay, func() error {
		if err := d.markOnce(ctx, key); err != nil {
			return fmt.Errorf("middleware: idempotency mark: %w", err)
		}
		return nil
	}, func(f retry.Failure) error {
		if d.cfg.IgnoreStoreErrors {
			return f.Err
		}
		reportFrom(ctx).retry(retryNote{err: f.Err, class: ClassOutage, attempt: f.Retry, delay: f.Delay})
		return nil
	}, Outage)
}

func (d *IdempotentConsumer) markOnce(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.StoreTimeout)
	defer cancel()
	record := telemetry.StoreCall(ctx, telemetry.StoreMark)
	err := d.store.MarkProcessed(ctx, key)
	record(err)
	return err
}
