package middleware

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/telemetry"
)

// begin begins a transaction with the claim of key, within StoreTimeout,
// after the outbox's locks of locks if there are any. Every error is an
// outage.
func (d *txDedup) begin(ctx context.Context, key string, locks []string) (tx pgx.Tx, claimed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StoreTimeout)
	defer cancel()
	record := telemetry.StoreCall(ctx, telemetry.StoreClaim)
	if len(locks) > 0 {
		tx, claimed, err = d.locking.BeginClaimAfter(ctx, key, func(b *pgx.Batch) { d.cfg.Outbox.QueueLockKeys(b, locks...) })
	} else {
		tx, claimed, err = d.store.BeginClaim(ctx, key)
	}
	record(err)
	if err != nil {
		return nil, false, Outage(fmt.Errorf("middleware: transactional idempotency: %w", err))
	}
	return tx, claimed, nil
}

// commit commits tx. It runs even when ctx is already cancelled (the router
// is closing): the handler's work is done and worth keeping.
func (d *txDedup) commit(ctx context.Context, tx pgx.Tx) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.StoreTimeout)
	defer cancel()
	record := telemetry.StoreCall(ctx, telemetry.StoreCommit)
	err := tx.Commit(ctx)
	record(err)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrTxCommitRollback), errors.Is(err, pgx.ErrTxClosed):
		return fmt.Errorf("middleware: transactional idempotency: commit: %w "+
			"(a statement of the handler failed and the handler returned nil, or it ended the transaction itself)", err)
	}
	return Outage(fmt.Errorf("middleware: transactional idempotency: commit: %w: %w", idempotency.ErrStoreUnavailable, err))
}

// rollback ends tx without committing if it is still open, and gives its
// connection back to the pool. Like commit it ignores ctx's cancellation.
// Its error is dropped: after a commit it is pgx.ErrTxClosed, and a failed
// rollback closes the connection, which ends the transaction just the same.
func (d *txDedup) rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.StoreTimeout)
	defer cancel()
	_ = tx.Rollback(ctx)
}

// failed returns the error of a handler that failed in tx: as it is, or
// marked as an outage when tx's connection broke meanwhile, since the
// handler's statements failed because the database went away (pgx reports
// some of those as a bare io.ErrUnexpectedEOF).
func failed(tx pgx.Tx, err error) error {
	if c, ok := tx.(*postgres.ClaimTx); ok {
		if tx = c.Open(); tx == nil {
			return err // nothing was sent, or the claim's own error decides
		}
	}
	if tx.Conn().IsClosed() {
		return Outage(err)
	}
	return err
}
