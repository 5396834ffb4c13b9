package middleware

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
)

// TransactionalStore is a store that begins a transaction on its own
// database and claims a key in it, as [TransactionalIdempotency] needs.
// *postgres.Store is one.
type TransactionalStore interface {
	// BeginClaim begins a transaction and claims key in it. When claimed,
	// tx is open and the caller ends it; otherwise key has a fresh mark,
	// tx is nil and nothing is left open.
	BeginClaim(ctx context.Context, key string) (tx pgx.Tx, claimed bool, err error)
}

var _ TransactionalStore = (*postgres.Store)(nil)

// TransactionalIdempotency is the transactional mode of [Idempotency], for
// handlers whose side effects live in the database of store: exactly-once
// effects, as the package doc describes. The handler finds the transaction
// with postgres.TxFromContext(msg.Context()), writes through it, and
// neither commits nor rolls it back itself. It may return messages only
// when cfg.Outbox is set: they are written into the outbox in the
// transaction ([ErrReturnedMessagesInTx] otherwise).
//
// Of cfg, Key, Scope, OnDuplicate, Outbox, LockKeys and DeferClaim apply;
// StoreTimeout bounds the begin with the claim (and the key locks), the
// write of the returned messages, and the commit (with DeferClaim, the
// begin and the claim go with the handler's first statement, under the
// handler's context, or with the commit); the fields that tune the mark of
// [Idempotency] are not used, and IgnoreStoreErrors is refused: the
// handler's writes need the database. LockKeys needs Outbox, and a store
// that is a [LockingStore]; DeferClaim a store that is a [DeferringStore].
func TransactionalIdempotency(store TransactionalStore, cfg IdempotencyConfig) (message.HandlerMiddleware, error) {
	switch {
	case store == nil:
		return nil, invalid("TransactionalIdempotency: the store is nil; pass the postgres.Store of the handler's database")
	case cfg.IgnoreStoreErrors:
		return nil, invalid("TransactionalIdempotency: IdempotencyConfig.IgnoreStoreErrors is set, " +
			"but the transactional mode cannot run a handler without its database; unset it")
	case cfg.LockKeys != nil && cfg.Outbox == nil:
		return nil, invalid("TransactionalIdempotency: IdempotencyConfig.LockKeys is set without Outbox; " +
			"the key locks order the outbox's messages: set Outbox to the outbox of the store's database, or unset LockKeys")
	}
	locking, _ := store.(LockingStore)
	if cfg.LockKeys != nil && locking == nil {
		return nil, invalid("TransactionalIdempotency: IdempotencyConfig.LockKeys needs a LockingStore (a *postgres.Store), not %T", store)
	}
	deferring, _ := store.(DeferringStore)
	if cfg.DeferClaim && deferring == nil {
		return nil, invalid("TransactionalIdempotency: IdempotencyConfig.DeferClaim needs a DeferringStore (a *postgres.Store), not %T; "+
			"unset DeferClaim to claim before the handler", store)
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("middleware: TransactionalIdempotency: %w", err)
	}
	d := &txDedup{store: store, locking: locking, cfg: cfg}
	if cfg.DeferClaim {
		d.deferring = deferring
	}
	return d.middleware, nil
}

// DeferringStore is a [TransactionalStore] that can send a transaction's
// BEGIN and claim together with its first statement, saving their round
// trip; [TransactionalIdempotency] uses it when
// IdempotencyConfig.DeferClaim is set. *postgres.Store is one.
type DeferringStore interface {
	TransactionalStore
	// DeferClaim returns a transaction that begins, runs the statements
	// before queues and claims key with its first statement.
	DeferClaim(key string, before func(b *pgx.Batch)) *postgres.ClaimTx
}

var _ DeferringStore = (*postgres.Store)(nil)

// txDedup is the state of one TransactionalIdempotency middleware.
type txDedup struct {
	store     TransactionalStore
	locking   LockingStore   // store, when it is one
	deferring DeferringStore // store, when it is one and IdempotencyConfig.DeferClaim is set
	cfg       IdempotencyConfig
}

func (d *txDedup) middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		k, err := d.cfg.keyOf(msg)
		if err != nil {
			return nil, err
		}
		locks, err := d.lockKeysOf(msg)
		if err != nil {
			return nil, err
		}
		if d.deferring != nil {
			return d.handleDeferred(msg, k, locks, h)
		}
		ctx := msg.Context()
		tx, claimed, err := d.begin(ctx, k.stored, locks)
		if err != nil {
			return nil, err
		}
		if !claimed {
			d.cfg.skipped(msg, k)
			return nil, nil
		}
		defer d.rollback(ctx, tx) // after a commit it does nothing; after a panic it ends tx
		return d.handleIn(msg, tx, h)
	}
}

// handleIn runs h with tx in msg's context, writes what it returned into
// the outbox and commits.
func (d *txDedup) handleIn(msg *message.Message, tx pgx.Tx, h message.HandlerFunc) ([]*message.Message, error) {
	ctx := msg.Context()
	txCtx, committed := d.bind(ctx, tx)
	msg.SetContext(txCtx)
	defer msg.SetContext(ctx)
	produced, err := h(msg)
	if err != nil {
		return produced, failed(tx, err)
	}
	if err := d.writeReturned(txCtx, tx, produced); err != nil {
		return nil, err
	}
	if err := d.commit(ctx, tx); err != nil {
		return nil, err
	}
	committed()
	return nil, nil
}
