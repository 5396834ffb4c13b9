package main

import (
	"context"
	"errors"
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
CREATE TABLE IF NOT EXISTS %[1]s (order_id text PRIMARY KEY, sku text NOT NULL, total int NOT NULL);
ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS state text NOT NULL DEFAULT 'placed', ADD COLUMN IF NOT EXISTS payment_timeout text;
CREATE TABLE IF NOT EXISTS %[2]s (order_id text NOT NULL, amount int NOT NULL, charged_at timestamptz NOT NULL DEFAULT now())`,
		l.table("orders"), l.table("payments_ledger")))
	if err != nil {
		return fmt.Errorf("create the shop's tables in %s: %w", l.schema, err)
	}
	return nil
}

// placeOrder writes the order row in tx, once however often it is called,
// and reports whether this call wrote it.
func (l ledger) placeOrder(ctx context.Context, tx pgx.Tx, o OrderPlaced) (bool, error) {
	tag, err := tx.Exec(ctx, "INSERT INTO "+l.table("orders")+" (order_id, sku, total) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
		o.OrderID, o.SKU, o.Total)
	return tag.RowsAffected() == 1, err
}

// setTimeout records the schedule ID of an order's payment timeout.
func (l ledger) setTimeout(ctx context.Context, tx pgx.Tx, orderID, scheduleID string) error {
	_, err := tx.Exec(ctx, "UPDATE "+l.table("orders")+" SET payment_timeout = $2 WHERE order_id = $1", orderID, scheduleID)
	return err
}

// settle moves a placed order to state (paid or expired) in tx and returns
// its payment timeout's schedule ID; ok is false when the order was not
// placed: settled already.
func (l ledger) settle(ctx context.Context, tx pgx.Tx, orderID, state string) (timeout string, ok bool, err error) {
	err = tx.QueryRow(ctx, "UPDATE "+l.table("orders")+" SET state = $2 WHERE order_id = $1 AND state = 'placed' RETURNING coalesce(payment_timeout, '')",
		orderID, state).Scan(&timeout)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return timeout, err == nil, err
}

// states counts the orders whose IDs match the LIKE pattern by state.
func (l ledger) states(ctx context.Context, pattern string) (map[string]int, error) {
	rows, err := l.pool.Query(ctx, "SELECT state, count(*) FROM "+l.table("orders")+" WHERE order_id LIKE $1 GROUP BY state", pattern)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	var state string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&state, &n}, func() error { out[state] = n; return nil })
	return out, err
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
