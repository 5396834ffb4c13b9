package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/internal/pgtx"
)

// Transact runs fn in a transaction on the outbox's pool and commits it
// when fn returns nil; when fn fails or panics it rolls back, and returns
// fn's error or re-panics. fn gets the transaction and a context carrying
// it, for [Outbox.ContextPublisher], [AfterCommit], [PublishDomainEvents]
// and postgres.TxFromContext. The functions registered with AfterCommit
// run after the commit. fn must not commit or roll back tx itself.
func (o *Outbox) Transact(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	tx, err := o.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("outbox: begin: %w", err)
	}
	txCtx, u := pgtx.Bind(ctx, tx)
	done := false
	defer func() {
		if !done {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := fn(txCtx, tx); err != nil {
		return err
	}
	done = true
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("outbox: commit: %w", err)
	}
	u.Committed()
	return nil
}

// AfterCommit registers fn to run once the transaction of ctx has
// committed, in the order registered; after a rollback it never runs. It
// returns an error wrapping ErrNoTransaction when ctx carries no
// transaction of [Outbox.Transact] or of the transactional consumer mode.
func AfterCommit(ctx context.Context, fn func()) error {
	u, ok := pgtx.From(ctx)
	if !ok {
		return fmt.Errorf("%w: AfterCommit needs the transaction of Outbox.Transact or of a transactional handler", ErrNoTransaction)
	}
	if err := u.AfterCommit(fn); errors.Is(err, pgtx.ErrCommitted) {
		return fmt.Errorf("outbox: AfterCommit: %w", err)
	}
	return nil
}
