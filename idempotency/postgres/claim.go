package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// errNilTx is returned by MarkProcessedTx when it is given no transaction.
var errNilTx = errors.New("postgres: MarkProcessedTx needs a transaction, got nil")

// beginClaim begins a transaction on the store's pool that locks locks
// and claims key, in one round trip. When claimed, tx is open and holds the
// claim; otherwise key has a fresh mark and nothing is left open.
func (s *Store) beginClaim(ctx context.Context, key string, locks []string) (tx pgx.Tx, claimed bool, err error) {
	tx, err = s.deferClaim(key, locks).begun(ctx)
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
// a duplicate. It runs the claim of [Store.Transact], so the claim
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
