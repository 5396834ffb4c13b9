package middleware

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/internal/config"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/internal/logattr"
	"github.com/koto-dev/watermill-koto/internal/reporting"
	"github.com/koto-dev/watermill-koto/internal/retry"
)

// Defaults of [IdempotencyConfig].
const (
	defaultStoreTimeout        = 5 * time.Second
	defaultMarkAfterAckTimeout = time.Minute
)

// IdempotencyConfig configures [Idempotency]. The zero value is the
// default: check, handle, mark.
type IdempotencyConfig struct {
	// Key returns the key of a message. Default [MessageKey]. An error makes
	// the message poison: it can never be processed safely.
	Key func(msg *message.Message) (string, error)
	// Scope returns the consumer a key belongs to: the store gets
	// idempotency.ScopedKey(scope, key). Default [HandlerName]. Return ""
	// to store the bare key.
	Scope func(msg *message.Message) string
	// StoreTimeout bounds each store call. Default 5s.
	StoreTimeout time.Duration
	// OnDuplicate, if set, is called for every duplicate that is skipped.
	// Handlers run concurrently, and so may it.
	OnDuplicate func(msg *message.Message, scope, key string)

	// IgnoreStoreErrors, in check-handle-mark, prefers availability to
	// deduplication: a failed check runs the handler anyway and a failed
	// mark is dropped. By default a store error is an outage.
	IgnoreStoreErrors bool
	// MarkBackoff, in check-handle-mark, spaces the retries of a failed
	// mark.
	MarkBackoff koto.Backoff
	// MarkAfterAckTimeout, in check-handle-mark, bounds the wait for the
	// ack of a handler that returned messages, and then its mark's
	// retries. Default 1m.
	MarkAfterAckTimeout time.Duration

	// Transactional runs each delivery in a transaction of the store's
	// database that claims its key: exactly-once effects.
	Transactional bool
	// Outbox, in the transactional mode, is the ContextPublisher of the
	// outbox in the store's database: the messages the handler returns
	// commit with its effects. Another publisher, one of its AutoTxPublisher
	// or Publisher(tx) included, is refused. Nil: the handler must not
	// return messages.
	Outbox message.Publisher
	// LockKeys, in the transactional mode, returns the partition keys to
	// lock before the claim, for commit order in the outbox. An error makes
	// the message poison.
	LockKeys func(msg *message.Message) ([]string, error)
	// DeferClaim, in the transactional mode, sends BEGIN and the claim
	// with the handler's first statement: a round trip less, but the
	// handler starts before the claim is decided.
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
		c.StoreTimeout = defaultStoreTimeout
	}
	if c.MarkAfterAckTimeout == 0 {
		c.MarkAfterAckTimeout = defaultMarkAfterAckTimeout
	}
}

// Validate reports every invalid field of c, its MarkBackoff included,
// zero fields counting as their defaults, in one error that wraps
// koto.ErrInvalidConfig.
func (c IdempotencyConfig) Validate() error {
	p := config.For("middleware.IdempotencyConfig")
	c.validate(p)
	return p.Err()
}

func (c IdempotencyConfig) validate(p *config.Problems) {
	c.setDefaults()
	if c.StoreTimeout < 0 {
		p.Add("StoreTimeout", "is negative (%v); use 0 for the default (%v) or a positive duration", c.StoreTimeout, defaultStoreTimeout)
	}
	if c.MarkAfterAckTimeout < 0 {
		p.Add("MarkAfterAckTimeout", "is negative (%v); use 0 for the default (%v) or a positive duration", c.MarkAfterAckTimeout, defaultMarkAfterAckTimeout)
	}
	p.Nest("MarkBackoff", c.MarkBackoff.Validate())
	if c.Transactional && c.Outbox != nil && !inContextTransaction(c.Outbox) {
		p.Add("Outbox", "is a %T that does not write into the transaction of the message's context, "+
			"so the messages the handler returns would commit apart from its claim; pass the outbox's ContextPublisher()", c.Outbox)
	}
	switch {
	case c.Transactional && c.IgnoreStoreErrors:
		p.Add("IgnoreStoreErrors", "is set with Transactional, but the transactional mode cannot run a handler without its database; unset it")
	case !c.Transactional && (c.Outbox != nil || c.LockKeys != nil || c.DeferClaim):
		p.Add("Transactional", "is not set, but Outbox, LockKeys or DeferClaim is, which only the transactional mode uses; "+
			"set Transactional (with the store of the handler's database), or unset them and publish with the outbox's Transact in the handler")
	}
}

// inContextTransaction reports whether pub writes into the transaction of
// each message's context, as the outbox's ContextPublisher says of itself;
// asked through an interface, since this package imports no outbox.
func inContextTransaction(pub message.Publisher) bool {
	o, ok := pub.(interface{ InContextTransaction() bool })
	return ok && o.InContextTransaction()
}

// Idempotency skips messages that were already processed: check, handle,
// mark, or with cfg.Transactional a transaction that claims each message
// (see the package doc; store must then be an idempotency.TxStore). The
// marks after an ack have no owner here: use [Defaults], whose
// [Chain.Close] waits for them.
func Idempotency(store idempotency.Store, cfg IdempotencyConfig) (message.HandlerMiddleware, error) {
	m, err := newIdempotency(store, cfg)
	if err != nil {
		return nil, err
	}
	return m.middleware, nil
}

// idempotent is a middleware of Idempotency; marks is nil in the
// transactional mode, which marks nothing after an ack.
type idempotent struct {
	middleware message.HandlerMiddleware
	marks      *checkHandleMark
}

func newIdempotency(store idempotency.Store, cfg IdempotencyConfig) (idempotent, error) {
	p := config.For("middleware.IdempotencyConfig")
	cfg.validate(p)
	txStore, isTx := store.(idempotency.TxStore)
	switch {
	case store == nil:
		p.Add("", "has no store: Idempotency got nil; pass an idempotency.Store, such as idempotency.NewMemoryStore or postgres.NewStore")
	case cfg.Transactional && !isTx:
		p.Add("Transactional", "is set, so the store must be an idempotency.TxStore (a *postgres.Store), not %T", store)
	}
	if err := p.Err(); err != nil {
		return idempotent{}, err
	}
	cfg.setDefaults()
	if cfg.Transactional {
		return idempotent{middleware: (&txDedup{store: txStore, cfg: cfg}).middleware}, nil
	}
	life, abort := context.WithCancel(context.Background())
	m := &checkHandleMark{store: store, cfg: cfg, pending: map[string][]chan struct{}{}, life: life, abort: abort}
	return idempotent{middleware: m.middleware, marks: m}, nil
}

// checkHandleMark is the check-handle-mark middleware, with the owner of
// the marks it makes after an ack.
type checkHandleMark struct {
	store idempotency.Store
	cfg   IdempotencyConfig

	turns turns // one delivery per key between its check and its settle

	closed atomic.Bool // set under mu
	mu     sync.Mutex
	// pending holds, per stored key, a channel closed when the delivery that
	// waits for its ack to mark the key (markOnAck) is done.
	pending map[string][]chan struct{}
	marks   sync.WaitGroup // the goroutines of markOnAck

	life  context.Context // ends when Close gives up on the pending marks
	abort context.CancelFunc
}

// middleware skips a message whose scoped key the store has, and marks the
// key of a message whose handler succeeded. A delivery waits for its key's
// turn, so that it checks only once a concurrent copy has settled.
func (d *checkHandleMark) middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		k, err := d.cfg.keyOf(msg)
		if err != nil {
			return nil, err
		}
		if d.closed.Load() {
			return nil, koto.Outage(fmt.Errorf("middleware: idempotency: %w", ErrClosed))
		}
		release, err := d.turns.take(msg.Context(), k.stored)
		if err != nil {
			return nil, koto.Outage(fmt.Errorf("middleware: idempotency: waiting for a concurrent delivery of key %s: %w", k.stored, err))
		}
		defer release()
		return d.handle(msg, k, h)
	}
}

// handle is check, handle, mark for a delivery that has its key's turn.
// It returns once the delivery settled: marked, failed, or left to
// markOnAck, whose pending mark the next turn waits for.
func (d *checkHandleMark) handle(msg *message.Message, k scopedKey, h message.HandlerFunc) ([]*message.Message, error) {
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

// isProcessed asks the store. A store error is an outage, or with
// IgnoreStoreErrors, noted and taken as "not processed".
func (d *checkHandleMark) isProcessed(ctx context.Context, key string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StoreTimeout)
	defer cancel()
	record := reporting.From(ctx).StoreCall(reporting.StoreCheck)
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
	return false, koto.Outage(err)
}

// mark records key after the handler succeeded. A store error is retried
// in place, with MarkBackoff, until the mark succeeds or ctx ends, so the
// handler does not run twice because of an outage; with IgnoreStoreErrors
// it is returned at once. Each attempt runs to its StoreTimeout even when
// ctx ends meanwhile: a router that closes cancels its messages' contexts,
// and a mark cut short then would make the redelivery run the handler
// again.
func (d *checkHandleMark) mark(ctx context.Context, key string) error {
	return retry.Do(ctx, d.cfg.MarkBackoff.Delay, func() error {
		if err := d.markOnce(ctx, key); err != nil {
			return fmt.Errorf("middleware: idempotency mark: %w", err)
		}
		return nil
	}, func(f retry.Failure) error {
		if d.cfg.IgnoreStoreErrors {
			return f.Err
		}
		reportFrom(ctx).retry(retryNote{err: f.Err, class: koto.ClassOutage, attempt: f.Retry, delay: f.Delay})
		return nil
	}, koto.Outage)
}

func (d *checkHandleMark) markOnce(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.StoreTimeout)
	defer cancel()
	record := reporting.From(ctx).StoreCall(reporting.StoreMark)
	err := d.store.MarkProcessed(ctx, key)
	record(err)
	return err
}
