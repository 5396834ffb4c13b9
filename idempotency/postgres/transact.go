package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/internal/pgtx"
)

var _ idempotency.TxStore = (*Store)(nil)

// Transact runs fn in a transaction on the store's pool that claims c.Key,
// as the package doc describes (Transactional claim), and commits when fn
// returns nil. claimed is false only for a duplicate: the key had a fresh
// mark, and nothing fn did is kept. A failed begin, claim or commit is an
// outage (koto.Outage), and so is fn's error once the transaction's
// connection broke; a commit that PostgreSQL turns into a rollback (fn
// ignored a failed statement) is not. A lock key with a NUL byte or
// invalid UTF-8, which PostgreSQL cannot read, is poison (koto.Poison),
// and nothing runs.
func (s *Store) Transact(ctx context.Context, c idempotency.Claim, fn func(ctx context.Context) error) (claimed bool, err error) {
	if err := checkLockKeys(c.LockKeys); err != nil {
		return false, err
	}
	if c.Defer {
		return s.transactDeferred(ctx, c, fn)
	}
	tx, claimed, err := s.begin(ctx, c)
	if err != nil || !claimed {
		return false, err
	}
	defer rollback(ctx, tx, c.Timeout) // after a commit it does nothing; after a panic it ends tx
	txCtx, u := pgtx.Bind(ctx, tx)
	if err := fn(txCtx); err != nil {
		return true, failed(tx, err)
	}
	if err := commit(ctx, tx, c.Timeout); err != nil {
		return true, err
	}
	u.Committed()
	return true, nil
}

// transactDeferred is Transact with the BEGIN and the claim sent with fn's
// first statement: what the claim found decides once fn has returned.
func (s *Store) transactDeferred(ctx context.Context, c idempotency.Claim, fn func(ctx context.Context) error) (bool, error) {
	tx := s.deferClaim(c.Key, c.LockKeys)
	defer rollback(ctx, tx, c.Timeout)
	txCtx, u := pgtx.Bind(ctx, tx)
	err := fn(txCtx)
	if err != nil {
		err = failed(tx, err)
	} else {
		err = commit(ctx, tx, c.Timeout)
	}
	sent, claimed, claimErr := tx.Outcome()
	switch {
	case claimErr != nil:
		return false, koto.Outage(claimErr)
	case sent && !claimed:
		return false, nil
	case err != nil:
		return true, err
	}
	u.Committed()
	return true, nil
}

// checkLockKeys refuses, as poison, a lock key that PostgreSQL cannot
// read as text (a NUL byte, invalid UTF-8): the claim would fail on every
// delivery, and as an outage it would be retried for ever.
func checkLockKeys(keys []string) error {
	for _, k := range keys {
		if strings.IndexByte(k, 0) >= 0 || !utf8.ValidString(k) {
			return koto.Poison(fmt.Errorf("postgres: transactional claim: lock key %q has a NUL byte or is not valid UTF-8", k))
		}
	}
	return nil
}

// begin begins the transaction with the claim, within timeout. Every
// error is an outage.
func (s *Store) begin(ctx context.Context, c idempotency.Claim) (pgx.Tx, bool, error) {
	ctx, cancel := withTimeout(ctx, c.Timeout)
	defer cancel()
	tx, claimed, err := s.beginClaim(ctx, c.Key, c.LockKeys)
	if err != nil {
		return nil, false, koto.Outage(fmt.Errorf("postgres: transactional claim: %w", err))
	}
	return tx, claimed, nil
}

// commit commits tx, even when ctx is already cancelled (the router is
// closing): the handler's work is done and worth keeping.
func commit(ctx context.Context, tx pgx.Tx, timeout time.Duration) error {
	ctx, cancel := withTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	err := tx.Commit(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrTxCommitRollback), errors.Is(err, pgx.ErrTxClosed):
		return fmt.Errorf("postgres: commit: %w "+
			"(a statement of the handler failed and the handler returned nil, or it ended the transaction itself)", err)
	}
	return koto.Outage(unavailable("commit", err))
}

// rollback ends tx if it is still open and gives its connection back to
// the pool, ignoring ctx's cancellation like commit. Its error is dropped:
// after a commit it is pgx.ErrTxClosed, and a failed rollback closes the
// connection, which ends the transaction just the same.
func rollback(ctx context.Context, tx pgx.Tx, timeout time.Duration) {
	ctx, cancel := withTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	_ = tx.Rollback(ctx)
}

// failed returns the error of fn that failed in tx: as it is, or marked as
// an outage when tx's connection broke meanwhile, since its statements
// then failed because the database went away (pgx reports some of those
// as a bare io.ErrUnexpectedEOF).
func failed(tx pgx.Tx, err error) error {
	if c, ok := tx.(*claimTx); ok {
		if tx = c.Open(); tx == nil {
			return err // nothing was sent, or the claim's own error decides
		}
	}
	if tx.Conn().IsClosed() {
		return koto.Outage(err)
	}
	return err
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
