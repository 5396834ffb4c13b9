package middleware

import (
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
)

// TransactionalIdempotency is the transactional mode of [Idempotency], for
// handlers whose side effects live in the PostgreSQL database of store:
// exactly-once effects. Each delivery runs in one transaction on pool that
// claims the message's scoped key and holds the handler's writes, so the
// effects and the mark commit together or not at all.
//
// Per delivery it begins the transaction and claims the key (the statement
// of postgres.Store.MarkProcessedTx) in one round trip. A key with a fresh
// mark is a duplicate: the transaction is rolled back and the message acked
// without calling the handler (outcome "duplicate" for [Logging],
// cfg.OnDuplicate). Otherwise the handler runs with the transaction in its
// message context, where postgres.TxFromContext(msg.Context()) finds it; it
// must do its database writes through that transaction
// and must not commit or roll it back itself. When the handler succeeds the
// transaction commits; when it fails or panics it rolls back, claim
// included, so its retry or redelivery runs it again.
//
// A handler error is returned as it is, for [DeadLetter] to classify,
// unless the transaction's connection broke meanwhile: then it is an
// outage ([Transient]), whatever the error says.
//
// A concurrent delivery of the same key (a redelivery during a rebalance,
// two instances) waits on the claim until the first transaction ends: after
// a commit it is a duplicate, after a rollback it runs.
//
// Errors of the database while beginning, claiming or committing are
// outages ([Transient]): retried by [DeadLetter], never dead-lettered. A
// commit whose outcome is unknown (the connection broke) is one too; the
// redelivery finds the claim if the commit happened. A commit that
// PostgreSQL turns into a rollback, because a statement of the handler
// failed and the handler returned nil all the same, is an ordinary error,
// retried and eventually dead-lettered.
//
// Of cfg, Key, Scope and OnDuplicate work as in [Idempotency]; StoreTimeout
// bounds beginning with the claim, and the commit (a claim that waits on a
// concurrent delivery for longer is an outage, and retried);
// IgnoreStoreErrors cannot apply, since the handler's writes need the
// database, and is refused; the other fields, which tune the mark of
// [Idempotency], are not used. store must keep its table in pool's
// database; usually it is built on pool. Size pool for one connection per
// message handled at once (a router handles one message per partition at a
// time), plus the store's own use.
//
// A handler here must not return messages: the router would publish them
// after the commit, and if that publish failed, the redelivery would find
// the claim and be skipped, losing them. ([Idempotency] avoids this by
// marking only once the router acked the message; this mode cannot, since
// the claim must commit with the handler's writes.) So a handler that
// returns messages is rolled back and its message dead-lettered with
// ErrReturnedMessagesInTx: a loud error instead of an occasional loss.
// Publish from the handler instead.
//
// See [Defaults] (Config.Transactional) for where it goes in the chain.
func TransactionalIdempotency(pool *pgxpool.Pool, store *postgres.Store, cfg IdempotencyConfig) (message.HandlerMiddleware, error) {
	switch {
	case pool == nil:
		return nil, fmt.Errorf("%w: TransactionalIdempotency: pool is nil; pass the pool of the handler's database", ErrInvalidConfig)
	case store == nil:
		return nil, fmt.Errorf("%w: TransactionalIdempotency: store is nil; pass a postgres.Store of the same database", ErrInvalidConfig)
	case cfg.IgnoreStoreErrors:
		return nil, fmt.Errorf("%w: TransactionalIdempotency: IdempotencyConfig.IgnoreStoreErrors is set, "+
			"but the transactional mode cannot run a handler without its database; unset it", ErrInvalidConfig)
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("middleware: TransactionalIdempotency: %w", err)
	}
	d := &txDedup{pool: pool, store: store, claim: store.Statements().Claim, cfg: cfg}
	return d.middleware, nil
}

// txDedup is the state of one TransactionalIdempotency middleware.
type txDedup struct {
	pool  *pgxpool.Pool
	store *postgres.Store
	claim string // the store's claim statement; $1 is the key's KeyUUID
	cfg   IdempotencyConfig
}

func (d *txDedup) middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		k, err := d.cfg.keyOf(msg)
		if err != nil {
			return nil, err
		}
		ctx := msg.Context()
		tx, claimed, err := d.begin(ctx, k.stored)
		if err != nil {
			return nil, err
		}
		defer d.rollback(ctx, tx) // after a commit it does nothing; after a panic it ends tx
		if !claimed {
			d.rollback(ctx, tx)
			d.cfg.skipped(msg, k)
			return nil, nil
		}
		msg.SetContext(postgres.ContextWithTx(ctx, tx))
		defer msg.SetContext(ctx)
		produced, err := h(msg)
		if err != nil {
			return produced, failed(tx, err)
		}
		if len(produced) > 0 {
			return nil, Permanent(fmt.Errorf("%w (it returned %d)", ErrReturnedMessagesInTx, len(produced)))
		}
		if err := d.commit(ctx, tx); err != nil {
			return nil, err
		}
		return nil, nil
	}
}
