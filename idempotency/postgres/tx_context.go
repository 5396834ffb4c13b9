package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/internal/pgtx"
)

// TxFromContext returns the transaction in ctx: the one [Store.Transact]
// runs a transactional handler in, or outbox's Transact's. The handler
// writes its effects through it and neither commits nor rolls it back.
func TxFromContext(ctx context.Context) (pgx.Tx, bool) {
	u, ok := pgtx.From(ctx)
	if !ok {
		return nil, false
	}
	return u.Tx, true
}
