package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// errNilTx is returned by MarkProcessedTx when it is given no transaction.
var errNilTx = errors.New("postgres: MarkProcessedTx needs a transaction, got nil")

// BeginClaim begins a transaction on the store's pool and claims key in it,
// BEGIN and the claim in one round trip (a pgx batch): the transactional
// mode of the package doc, as middleware.TransactionalIdempotency runs it.
//
// When claimed is true, tx is open and holds the claim: the caller writes
// its effects in it and commits or rolls it back. When claimed is false, a
// fresh mark exists (a duplicate): BeginClaim has ended the transaction and
// tx is nil. An error leaves nothing open.
func (s *Store) BeginClaim(ctx context.Context, key string) (tx pgx.Tx, claimed bool, err error) {
	return s.BeginClaimAfter(ctx, key, nil)
}

// BeginClaimAfter is [Store.BeginClaim] with the statements that before
// queues into b run between BEGIN and the claim, in the same round trip:
// what must precede the transaction's first write, such as the outbox's
// key locks (outbox.Outbox.QueueLockKeys). Their results are dropped; one
// that fails ends the transaction, and the error says so. A nil before
// queues nothing.
func (s *Store) BeginClaimAfter(ctx context.Context, key string, before func(b *pgx.Batch)) (tx pgx.Tx, claimed bool, err error) {
	tx, err = s.DeferClaim(key, before).begun(ctx)
	switch {
	case errors.Is(err, ErrDuplicate):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return tx, true, nil
}

// MarkProcessedTx claims key inside tx, a transaction of the caller's on
// the store's database: claimed is true when tx marked the key (it had no
// mark, or one older than the window) and false when a fresh mark exists,
// a duplicate. It runs the statement of [Store.BeginClaim], so the claim
// commits or rolls back with tx and a concurrent claim of the key waits
// for tx to end, as the package doc describes.
//
// The table is created, or checked, on another connection of the pool on
// first use; when every connection may be busy in transactions, call
// EnsureSchema at startup.
func (s *Store) MarkProcessedTx(ctx context.Context, tx pgx.Tx, key string) (claimed bool, err error) {
	if tx == nil {
		return false, errNilTx
	}
	if err := s.ensure(ctx); err != nil {
		return false, err
	}
	tag, err := tx.Exec(ctx, s.sql.claim, keyArg(key))
	if err != nil {
		return false, unavailable("claim", err)
	}
	return tag.RowsAffected() == 1, nil
}
