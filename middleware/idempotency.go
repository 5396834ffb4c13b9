package middleware

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
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
	// MarkAfterAckTimeout bounds the retries of the mark of a message whose
	// handler returned messages, which [Idempotency] makes once the router
	// acked it. Past it the mark is given up and logged; only a later
	// duplicate of the message would then run the handler again. Default
	// 1 min.
	MarkAfterAckTimeout time.Duration
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
	if c.MarkAfterAckTimeout == 0 {
		c.MarkAfterAckTimeout = time.Minute
	}
	c.MarkBackoff.setDefaults()
}

// Validate reports the first invalid field of c, zero fields counting as
// their defaults, with an error that wraps [ErrInvalidConfig].
// NewIdempotency calls it.
func (c IdempotencyConfig) Validate() error {
	c.setDefaults()
	switch {
	case c.StoreTimeout < 0:
		return invalid("IdempotencyConfig.StoreTimeout is negative (%v); use 0 for the default (5s) or a positive duration", c.StoreTimeout)
	case c.MarkAfterAckTimeout < 0:
		return invalid("IdempotencyConfig.MarkAfterAckTimeout is negative (%v); use 0 for the default (1m) or a positive duration", c.MarkAfterAckTimeout)
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
// When the handler returns messages, the router publishes them after the
// whole chain has returned, and acks the message only if that publish
// succeeds (it nacks it otherwise). So the key of such a message is not
// marked when the handler returns but once the message is acked: a failed
// publish marks nothing, and the redelivery runs the handler again and
// returns its messages again. A goroutine waits for the ack or the nack, at
// most cfg.MarkAfterAckTimeout (not for the message's context, which an
// outer middleware may cancel before the router acks); after an ack it
// marks, retrying a store error with MarkBackoff for up to
// MarkAfterAckTimeout. A delivery of the same key that arrives meanwhile (a
// duplicate right behind it on its partition) waits for that mark and is
// then skipped; if the mark is still pending after StoreTimeout, the
// delivery fails as an outage (ErrMarkPending) and is retried, rather than
// running the handler a second time. A crash, or a mark that fails for longer than
// MarkAfterAckTimeout, between the ack and the mark leaves the message
// unmarked: delivery is still at least once, only a later duplicate of it
// would run the handler again. Such a failed mark is logged on a line of
// its own, at warn.
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

// NewIdempotency is [Idempotency] that returns a configuration error,
// which wraps [ErrInvalidConfig], instead of panicking.
func NewIdempotency(store idempotency.Store, cfg IdempotencyConfig) (message.HandlerMiddleware, error) {
	if store == nil {
		return nil, invalid("Idempotency: the store is nil; pass an idempotency.Store, such as idempotency.NewMemoryStore or postgres.NewStore")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &dedup{store: store, cfg: cfg, pending: map[string][]chan struct{}{}}
	return d.middleware, nil
}

type dedup struct {
	store idempotency.Store
	cfg   IdempotencyConfig

	mu sync.Mutex
	// pending holds, per stored key, a channel closed when the delivery that
	// waits for its ack to mark the key (markOnAck) is done.
	pending map[string][]chan struct{}
}

func (d *dedup) middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		k, err := d.cfg.keyOf(msg)
		if err != nil {
			return nil, err
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
			d.markOnAck(ctx, msg, k.stored)
			return produced, nil
		}
		if err := d.mark(ctx, k.stored); err != nil {
			if !d.cfg.IgnoreStoreErrors {
				return nil, err
			}
			reportFrom(ctx).note(slog.String(IdempotencyStoreErrorAttr, err.Error()))
		}
		return produced, nil
	}
}

// markOnAck marks key once the router acks msg, which it does after it
// published the messages the handler returned. A nack, or no ack within
// MarkAfterAckTimeout, marks nothing: the redelivery runs the handler again.
// The wait does not end with msg's context, since an outer middleware (a
// timeout, say) may cancel it before the router publishes and acks. Until
// the goroutine is done, deliveries of key wait in awaitPending. It lives at
// most twice MarkAfterAckTimeout: the wait for the ack, then the mark.
func (d *dedup) markOnAck(ctx context.Context, msg *message.Message, key string) {
	done := make(chan struct{})
	d.mu.Lock()
	d.pending[key] = append(d.pending[key], done)
	d.mu.Unlock()
	go func() {
		defer d.settle(key, done)
		if !acked(msg, d.cfg.MarkAfterAckTimeout) {
			return
		}
		// msg's context may end right after the ack (watermill-kafka cancels
		// it then), so the mark gets a context of its own.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.MarkAfterAckTimeout)
		defer cancel()
		if err := d.mark(ctx, key); err != nil {
			reportFrom(ctx).late("idempotency mark after the ack failed; a later duplicate of the message would run the handler again", err)
		}
	}()
}

// acked waits until msg is acked (true), or nacked or timeout passes (false).
func acked(msg *message.Message, timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-msg.Acked():
		return true
	case <-msg.Nacked():
		return false
	case <-t.C:
		return false
	}
}

// settle ends the pending mark of key that done stands for.
func (d *dedup) settle(key string, done chan struct{}) {
	d.mu.Lock()
	d.pending[key] = slices.DeleteFunc(d.pending[key], func(c chan struct{}) bool { return c == done })
	if len(d.pending[key]) == 0 {
		delete(d.pending, key)
	}
	d.mu.Unlock()
	close(done)
}

// awaitPending waits while earlier deliveries of key wait for their ack to
// mark it, so that a duplicate right behind one is skipped. After
// StoreTimeout it returns ErrMarkPending as an outage, so the delivery is
// retried later instead of running the handler a second time.
func (d *dedup) awaitPending(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StoreTimeout)
	defer cancel()
	for {
		d.mu.Lock()
		var done chan struct{}
		if p := d.pending[key]; len(p) > 0 {
			done = p[0]
		}
		d.mu.Unlock()
		if done == nil {
			return nil
		}
		select {
		case <-done:
		case <-ctx.Done():
			return Transient(fmt.Errorf("%w (key %s): %w", ErrMarkPending, key, ctx.Err()))
		}
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
// handler does not run twice because of an outage; with IgnoreStoreErrors
// it is returned at once.
func (d *dedup) mark(ctx context.Context, key string) error {
	for n := 0; ; n++ {
		err := d.markOnce(ctx, key)
		if err == nil {
			return nil
		}
		err = fmt.Errorf("middleware: idempotency mark: %w", err)
		if d.cfg.IgnoreStoreErrors {
			return err
		}
		delay := d.cfg.MarkBackoff.Delay(n)
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
