package middleware

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
)

// TxOutbox is a transactional outbox in the database of a
// [TransactionalStore], as [TransactionalIdempotency] uses it
// (IdempotencyConfig.Outbox). *outbox.Outbox is one; this package cannot
// name it, since the outbox package imports this one.
type TxOutbox interface {
	// BindTx returns ctx carrying tx, for the outbox's publishers and
	// postgres.TxFromContext, and committed, which the middleware calls
	// once tx has committed.
	BindTx(ctx context.Context, tx pgx.Tx) (txCtx context.Context, committed func())
	// PublishTx writes msgs, bound for topic, into the outbox in tx.
	PublishTx(ctx context.Context, tx pgx.Tx, topic string, msgs ...*message.Message) error
	// QueueLockKeys queues into b, a batch that begins a transaction, the
	// statement that locks keys until the transaction ends.
	QueueLockKeys(b *pgx.Batch, keys ...string)
}

// LockingStore is a [TransactionalStore] that runs statements of the
// caller's between BEGIN and its claim, in the same round trip, as
// IdempotencyConfig.LockKeys needs. *postgres.Store is one.
type LockingStore interface {
	TransactionalStore
	// BeginClaimAfter is BeginClaim with the statements before queues
	// into b run after BEGIN and before the claim.
	BeginClaimAfter(ctx context.Context, key string, before func(b *pgx.Batch)) (tx pgx.Tx, claimed bool, err error)
}

var _ LockingStore = (*postgres.Store)(nil)

// lockKeysOf returns the keys to lock for msg, with LockKeys. An error
// makes the message poison.
func (d *txDedup) lockKeysOf(msg *message.Message) ([]string, error) {
	if d.cfg.LockKeys == nil {
		return nil, nil
	}
	keys, err := d.cfg.LockKeys(msg)
	if err != nil {
		return nil, Poison(fmt.Errorf("middleware: transactional idempotency: lock keys: %w", err))
	}
	return keys, nil
}

// bind returns ctx carrying tx: bound to the outbox when there is one.
func (d *txDedup) bind(ctx context.Context, tx pgx.Tx) (context.Context, func()) {
	if d.cfg.Outbox == nil {
		return postgres.ContextWithTx(ctx, tx), func() {}
	}
	return d.cfg.Outbox.BindTx(ctx, tx)
}

// writeReturned writes the messages the handler returned into the outbox
// in tx, for the router handler's publish topic, with the correlation ID
// of ctx, so that they commit with it; the router then has nothing left to
// publish. Without an outbox, or without a publish topic, they are poison.
func (d *txDedup) writeReturned(ctx context.Context, tx pgx.Tx, produced []*message.Message) error {
	n := len(produced)
	if n == 0 {
		return nil
	}
	if d.cfg.Outbox == nil {
		return Poison(fmt.Errorf("%w (it returned %d)", ErrReturnedMessagesInTx, n))
	}
	topic := message.PublishTopicFromCtx(ctx)
	if topic == "" {
		return Poison(fmt.Errorf("%w: it returned %d, but its router handler has no publish topic; "+
			"add it with router.AddHandler and a publish topic, or publish through the outbox's ContextPublisher", ErrReturnedMessagesInTx, n))
	}
	correlation.Stamp(ctx, produced...)
	wctx, cancel := context.WithTimeout(ctx, d.cfg.StoreTimeout)
	defer cancel()
	if err := d.cfg.Outbox.PublishTx(wctx, tx, topic, produced...); err != nil {
		return failed(tx, fmt.Errorf("middleware: transactional idempotency: writing %d returned message(s) for %s into the outbox: %w", n, topic, err))
	}
	return nil
}
