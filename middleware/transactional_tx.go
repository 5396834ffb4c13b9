package middleware

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/koto-dev/watermill-koto/idempotency"
)

// begin opens a transaction on the pool and claims key in it. pgx sends
// BEGIN and the claim as one batch (pgx.Batch.BeginTx), so both cost one
// round trip. claimed is false when key has a fresh mark: a duplicate. On
// an error nothing is left open.
func (d *txDedup) begin(ctx context.Context, key string) (tx pgx.Tx, claimed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StoreTimeout)
	defer cancel()
	if err := d.store.EnsureSchema(ctx); err != nil {
		return nil, false, Transient(fmt.Errorf("middleware: transactional idempotency: %w", err))
	}
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(d.claim, pgtype.UUID{Bytes: idempotency.KeyUUID(key), Valid: true})
	br := d.pool.SendBatch(ctx, b)
	tx = br.Tx()
	claimed, err = readClaim(br)
	if err != nil {
		d.rollback(ctx, tx)
		return nil, false, Transient(fmt.Errorf("middleware: transactional idempotency: begin and claim: %w: %w",
			idempotency.ErrStoreUnavailable, err))
	}
	return tx, claimed, nil
}

// readClaim reads the results of the begin-and-claim batch and closes it:
// whether the claim inserted (or renewed) the mark.
func readClaim(br pgx.BatchResults) (bool, error) {
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return false, err
	}
	tag, err := br.Exec()
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	return err == nil && tag.RowsAffected() == 1, err
}

// commit commits tx. It runs even when ctx is already cancelled (the router
// is closing): the handler's work is done and worth keeping.
func (d *txDedup) commit(ctx context.Context, tx pgx.Tx) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.StoreTimeout)
	defer cancel()
	err := tx.Commit(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrTxCommitRollback), errors.Is(err, pgx.ErrTxClosed):
		return fmt.Errorf("middleware: transactional idempotency: commit: %w "+
			"(a statement of the handler failed and the handler returned nil, or it ended the transaction itself)", err)
	}
	return Transient(fmt.Errorf("middleware: transactional idempotency: commit: %w: %w", idempotency.ErrStoreUnavailable, err))
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
	if tx.Conn().IsClosed() {
		return Transient(err)
	}
	return err
}
