package cqrs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
)

// The durable outbox of one database: orders commits its OrderPlaced with
// the transaction that saves the order; payments, a transactional consumer,
// commits its payment row, the claim of the message and PaymentProcessed
// together. The example runs against the PostgreSQL at DATABASE_URL
// (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable), in a
// schema of its own that it drops at the end, and an embedded Kafka broker.
func ExampleNewDurableOutbox() {
	ctx := context.Background()
	kafka, err := embedded.Start(ctx)
	check(err)
	defer kafka.Close()
	pool, schema := pgtest.ExampleDatabase(ctx)
	defer pool.Close()
	defer pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	_, err = pool.Exec(ctx, "CREATE TABLE "+schema+".payments (order_id text PRIMARY KEY, amount int)")
	check(err)

	// At startup, once per database: the tables, the forwarder.
	durable, err := cqrs.NewDurableOutbox(ctx, pool, cqrs.DurableOutboxConfig{
		Broker: broker.Config{Brokers: kafka.Addrs()},
		Outbox: outbox.Config{Schema: schema},
		Store:  postgres.Config{Schema: schema},
		Logger: slog.New(slog.DiscardHandler),
	})
	check(err)
	defer durable.Close()

	// payments charges each order once, and says so in the same transaction.
	payments, err := durable.EventPublisher(cqrs.EventPublisherConfig{Service: "payments"})
	check(err)
	svc, err := durable.Service(cqrs.ServiceConfig{Name: "payments", AutoProvisionTopics: true, Logger: slog.New(slog.DiscardHandler)})
	check(err)
	defer svc.Close(ctx)
	router, err := message.NewRouter(message.RouterConfig{}, nil)
	check(err)
	defer router.Close()
	check(svc.Register(ctx, router, cqrs.NewEventConsumer(func(ctx context.Context, ev *OrderPlaced) error {
		tx, _ := postgres.TxFromContext(ctx)
		if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".payments VALUES ($1, $2)", ev.OrderID, ev.Total); err != nil {
			return err
		}
		return payments.Publish(ctx, PaymentProcessed{OrderID: ev.OrderID})
	}, cqrs.From("orders"))))
	runRouterUntil(ctx, router)

	// orders publishes in the transaction that saves the order.
	orders, err := durable.EventPublisher(cqrs.EventPublisherConfig{Service: "orders"})
	check(err)
	err = orders.Publish(ctx, OrderPlaced{OrderID: "o-1", Total: 990})
	fmt.Println("outside a transaction:", errors.Is(err, outbox.ErrNoTransaction))
	check(durable.Outbox().Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
		// ... save the order with tx ...
		return orders.Publish(ctx, OrderPlaced{OrderID: "o-1", Total: 990})
	}))

	sub, err := broker.NewSubscriber(broker.Config{Brokers: kafka.Addrs(), ConsumerGroup: "example"})
	check(err)
	defer sub.Close()
	msgs, err := sub.Subscribe(ctx, "payments.payment-processed")
	check(err)
	msg := <-msgs
	msg.Ack()
	fmt.Println(string(msg.Payload))
	// Output:
	// outside a transaction: true
	// {"orderId":"o-1"}
}
