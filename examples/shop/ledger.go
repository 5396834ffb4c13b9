package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ledger is the business tables of orders and payments, in the example's
// schema of the database the outbox is in.
type ledger struct {
	pool   *pgxpool.Pool
	schema string
}

func (l ledger) table(name string) string { return pgx.Identifier{l.schema, name}.Sanitize() }

// create creates the tables. The payments ledger has no unique constraint:
// a message charged twice would show as two rows.
func (l ledger) create(ctx context.Context) error {
	_, err := l.pool.Exec(ctx, fmt.Sprintf(`
CREATE TABLE IF NOT EXISTS %s (order_id text PRIMARY KEY, sku text NOT NULL, total int NOT NULL);
CREATE TABLE IF NOT EXISTS %s (order_id text NOT NULL, amount int NOT NULL, charged_at timestamptz NOT NULL DEFAULT now())`,
		l.table("orders"), l.table("payments_ledger")))
	if err != nil {
		return fmt.Errorf("create the shop's tables in %s: %w", l.schema, err)
	}
	return nil
}

// placeOrder writes the order row in tx, once however often it is called.
func (l ledger) placeOrder(ctx context.Context, tx pgx.Tx, o OrderPlaced) error {
	_, err := tx.Exec(ctx, "INSERT INTO "+l.table("orders")+" (order_id, sku, total) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
		o.OrderID, o.SKU, o.Total)
	return err
}

// charge writes a payment row in tx.
func (l ledger) charge(ctx context.Context, tx pgx.Tx, orderID string, amount int) error {
	_, err := tx.Exec(ctx, "INSERT INTO "+l.table("payments_ledger")+" (order_id, amount) VALUES ($1, $2)", orderID, amount)
	return err
}

// charges counts the payment rows of the orders whose IDs match the LIKE
// pattern.
func (l ledger) charges(ctx context.Context, pattern string) (int, error) {
	var n int
	err := l.pool.QueryRow(ctx, "SELECT count(*) FROM "+l.table("payments_ledger")+" WHERE order_id LIKE $1", pattern).Scan(&n)
	return n, err
}
