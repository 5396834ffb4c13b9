package outbox

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/middleware"
)

// The transactional consumer mode (middleware.TransactionalIdempotency)
// writes into the outbox through these methods: the middleware package
// cannot import this one, so it names them in middleware.TxOutbox.
var _ middleware.TxOutbox = (*Outbox)(nil)

// BindTx is [WithTx]: the transactional consumer mode binds its
// transaction with it, so that [Outbox.ContextPublisher], [AfterCommit]
// and [PublishDomainEvents] work in the handler.
func (o *Outbox) BindTx(ctx context.Context, tx pgx.Tx) (txCtx context.Context, committed func()) {
	return WithTx(ctx, tx)
}

// PublishTx writes msgs into the outbox in tx, for topic, like
// [Outbox.Publisher](tx).Publish, with ctx bounding the write. It is how
// the transactional consumer mode writes the messages a handler returns.
func (o *Outbox) PublishTx(ctx context.Context, tx pgx.Tx, topic string, msgs ...*message.Message) error {
	if tx == nil {
		return fmt.Errorf("%w: PublishTx got a nil transaction", ErrNoTransaction)
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := o.check(topic, msgs); err != nil {
		return err
	}
	u, ok := unitOf(ctx)
	if ok && u.tx != tx {
		u = nil
	}
	return o.write(ctx, tx, u, topic, msgs)
}

// QueueLockKeys queues into b the statement of [Outbox.LockKeys] for keys,
// for a batch that begins a transaction: the transactional consumer mode
// takes its key locks this way, between BEGIN and its claim, in one round
// trip. Queued after the transaction's first write, the statement locks
// nothing, so queue it first. Empty keys are ignored; with none, nothing is
// queued.
func (o *Outbox) QueueLockKeys(b *pgx.Batch, keys ...string) {
	if keys = nonEmpty(keys); len(keys) > 0 {
		b.Queue(lockKeysSQL, keys, o.t.keySeed)
	}
}
