package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
)

// unitKey keys a *unit in a context.
type unitKey struct{}

// unit is the bookkeeping of one transaction bound with WithTx: what runs
// after its commit, and what was written into the outbox in it.
type unit struct {
	tx pgx.Tx

	mu          sync.Mutex
	afterCommit []func()
	done        bool
	written     int               // messages the publishers wrote in tx
	published   map[Aggregate]int // domain events already written, per aggregate
}

// WithTx returns a copy of ctx that carries tx, for [Outbox.ContextPublisher],
// [AfterCommit] and [PublishDomainEvents], and committed, which the owner of
// tx calls once tx.Commit has succeeded: it runs the functions registered
// with AfterCommit, once. After a rollback, do not call it. [Transact] does
// all this for you.
//
// The transaction travels under the same context key as
// postgres.ContextWithTx, so [TxFromContext] and postgres.TxFromContext
// see the same one, and a context made by either reaches the publishers.
func WithTx(ctx context.Context, tx pgx.Tx) (txCtx context.Context, committed func()) {
	u := &unit{tx: tx}
	ctx = postgres.ContextWithTx(ctx, tx)
	return context.WithValue(ctx, unitKey{}, u), u.committed
}

// TxFromContext returns the transaction in ctx (from WithTx, Transact or
// postgres.ContextWithTx), and whether there is one.
func TxFromContext(ctx context.Context) (pgx.Tx, bool) { return postgres.TxFromContext(ctx) }

// unitOf returns the unit of the transaction in ctx, if that transaction
// was bound with WithTx.
func unitOf(ctx context.Context) (*unit, bool) {
	tx, ok := TxFromContext(ctx)
	if !ok {
		return nil, false
	}
	u, ok := ctx.Value(unitKey{}).(*unit)
	return u, ok && u.tx == tx
}

// AfterCommit registers fn to run once the transaction of ctx has
// committed, in the order registered; after a rollback it never runs. It
// returns an error wrapping ErrNoTransaction when ctx carries no transaction
// bound with WithTx or Transact (postgres.ContextWithTx alone binds none).
func AfterCommit(ctx context.Context, fn func()) error {
	u, ok := unitOf(ctx)
	if !ok {
		return fmt.Errorf("%w: AfterCommit needs a transaction bound with outbox.WithTx or outbox.Transact", ErrNoTransaction)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done {
		return errors.New("outbox: AfterCommit after the transaction committed")
	}
	u.afterCommit = append(u.afterCommit, fn)
	return nil
}

func (u *unit) committed() {
	u.mu.Lock()
	if u.done {
		u.mu.Unlock()
		return
	}
	u.done = true
	fns := u.afterCommit
	u.afterCommit = nil
	u.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// wrote counts n messages written into the unit's transaction.
func (u *unit) wrote(n int) {
	u.mu.Lock()
	u.written += n
	u.mu.Unlock()
}

func (u *unit) writtenCount() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.written
}

// Transact runs fn in a transaction on pool and commits it when fn returns
// nil; when fn fails or panics it rolls back, and returns fn's error or
// re-panics. fn gets the transaction, and a context that carries it (see
// WithTx), for the outbox publishers and for passing on. The functions
// registered with AfterCommit run after the commit. fn must not commit or
// roll back tx itself.
func Transact(ctx context.Context, pool *pgxpool.Pool, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if pool == nil {
		return fmt.Errorf("%w: Transact: pool is nil", ErrInvalidConfig)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("outbox: begin: %w", err)
	}
	txCtx, committed := WithTx(ctx, tx)
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
	committed()
	return nil
}
