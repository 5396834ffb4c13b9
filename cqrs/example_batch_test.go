package cqrs_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
)

// An accounting service loads every OrderPlaced into its sales table in
// batches: one transaction per batch claims its events and copies their
// rows, so each order is counted once however often it is delivered. The
// example runs against the PostgreSQL at DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable), in a schema of
// its own that it drops at the end, and an embedded Kafka broker.
func ExampleNewBatchEventConsumer() {
	ctx := context.Background()
	kafka, err := embedded.Start(ctx)
	check(err)
	defer kafka.Close()
	pool, schema := pgtest.ExampleDatabase(ctx)
	defer pool.Close()
	defer pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	_, err = pool.Exec(ctx, "CREATE TABLE "+schema+".sales (order_id text PRIMARY KEY, total int NOT NULL)")
	check(err)
	durable, err := cqrs.NewDurableOutbox(ctx, pool, cqrs.DurableOutboxConfig{
		Broker: broker.Config{Brokers: kafka.Addrs()},
		Outbox: outbox.Config{Schema: schema},
		Store:  postgres.Config{Schema: schema},
		Logger: slog.New(slog.DiscardHandler),
	})
	check(err)
	defer durable.Close()

	svc, err := durable.Service(cqrs.ServiceConfig{Name: "accounting", AutoProvisionTopics: true, Logger: slog.New(slog.DiscardHandler)})
	check(err)
	defer svc.Close(ctx)
	router, err := message.NewRouter(message.RouterConfig{}, nil)
	check(err)
	defer router.Close()
	check(svc.Register(ctx, router, cqrs.NewBatchEventConsumer(func(ctx context.Context, batch []cqrs.BatchItem[OrderPlaced]) error {
		rows := make([][]any, len(batch))
		for i, it := range batch {
			rows[i] = []any{it.Event.OrderID, it.Event.Total}
		}
		tx, _ := postgres.TxFromContext(ctx) // the batch's transaction, which claimed every event
		_, err := tx.CopyFrom(ctx, pgx.Identifier{schema, "sales"}, []string{"order_id", "total"}, pgx.CopyFromRows(rows))
		return err
	}, cqrs.From("orders"), cqrs.WithBatch(broker.BatchConfig{MaxMessages: 200}))))
	runRouterUntil(ctx, router)

	orders, err := durable.EventPublisher(cqrs.EventPublisherConfig{Service: "orders"})
	check(err)
	check(durable.Outbox().Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
		for i := range 1000 {
			if err := orders.Publish(ctx, OrderPlaced{OrderID: fmt.Sprintf("o-%d", i), Total: 10}); err != nil {
				return err
			}
		}
		return nil
	}))

	var orderCount, revenue int
	for orderCount < 1000 {
		time.Sleep(50 * time.Millisecond)
		check(pool.QueryRow(ctx, "SELECT count(*), coalesce(sum(total), 0) FROM "+schema+".sales").Scan(&orderCount, &revenue))
	}
	fmt.Println("orders:", orderCount, "revenue:", revenue)
	// Output:
	// orders: 1000 revenue: 10000
}
