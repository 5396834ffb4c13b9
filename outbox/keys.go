package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/internal/pgschema"
)

// LockKeys locks keys, the partition keys of the messages tx will
// publish, until tx ends, waiting while another transaction holds one of
// them. Taken before tx's first write, the locks make one key's messages
// reach Kafka in the order their transactions committed (see Order in the
// package documentation); after a write LockKeys locks nothing and returns
// an error wrapping [ErrKeyLockAfterWrite]. Empty keys are ignored. The
// locks are advisory locks on a hash of the key, apart from the
// application's own (see Order in the package documentation).
func (o *Outbox) LockKeys(ctx context.Context, tx pgx.Tx, keys ...string) error {
	if tx == nil {
		return fmt.Errorf("%w: LockKeys got a nil transaction", ErrNoTransaction)
	}
	keys = pgschema.NonEmpty(keys)
	if len(keys) == 0 {
		return nil
	}
	var locked int
	if err := tx.QueryRow(ctx, pgschema.LockKeysSQL, keys).Scan(&locked); err != nil {
		return fmt.Errorf("outbox: lock keys: %w", err)
	}
	if locked == 0 {
		return fmt.Errorf("%w: the transaction has written already; take the key locks before its first write", ErrKeyLockAfterWrite)
	}
	return nil
}
