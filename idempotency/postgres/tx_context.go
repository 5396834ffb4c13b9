package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

type txKey struct{}

// ContextWithTx returns a copy of ctx that carries tx, the transaction that
// claimed a message, for its handler to write its effects in.
func ContextWithTx(ctx context.Context, tx pgx.Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// TxFromContext returns the transaction ContextWithTx put in ctx, and
// whether there is one.
func TxFromContext(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(pgx.Tx)
	return tx, ok && tx != nil
}
