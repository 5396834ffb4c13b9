package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// lockKeysSQL takes the transaction-scoped advisory lock of each distinct
// key hash, in ascending order so that two transactions locking the same
// keys cannot deadlock, and only while the transaction has no xid yet. It
// returns how many locks it took: none when the transaction had written.
const lockKeysSQL = `SELECT count(pg_advisory_xact_lock(h)) FROM (
	SELECT DISTINCT hashtextextended(k, $2) AS h FROM unnest($1::text[]) AS k ORDER BY h
) AS keys WHERE pg_current_xact_id_if_assigned() IS NULL`

// LockKeys locks keys, the partition keys of the messages tx will
// publish, until tx ends, waiting while another transaction holds one of
// them. Taken before tx's first write, the locks make one key's messages
// reach Kafka in the order their transactions committed (see Order in the
// package documentation); after a write LockKeys locks nothing and returns
// an error wrapping [ErrKeyLockAfterWrite]. Empty keys are ignored. The
// locks are advisory locks on a hash of the outbox table and the key.
func (o *Outbox) LockKeys(ctx context.Context, tx pgx.Tx, keys ...string) error {
	if tx == nil {
		return fmt.Errorf("%w: LockKeys got a nil transaction", ErrNoTransaction)
	}
	keys = nonEmpty(keys)
	if len(keys) == 0 {
		return nil
	}
	var locked int
	if err := tx.QueryRow(ctx, lockKeysSQL, keys, o.t.keySeed).Scan(&locked); err != nil {
		return fmt.Errorf("outbox: lock keys: %w", err)
	}
	if locked == 0 {
		return fmt.Errorf("%w: the transaction has written already; take the key locks before its first write", ErrKeyLockAfterWrite)
	}
	return nil
}

// nonEmpty returns keys without the empty ones.
func nonEmpty(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if k != "" {
			out = append(out, k)
		}
	}
	return out
}
