package middleware_test

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// A payments consumer whose charge and claim commit together. The example
// runs against the PostgreSQL at DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable), in a schema
// of its own that it drops at the end.
func ExampleIdempotency_transactional() {
	ctx := context.Background()
	pool, schema := pgtest.ExampleDatabase(ctx)
	defer pool.Close()
	defer pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	_, err := pool.Exec(ctx, "CREATE TABLE "+schema+".charges (order_id text PRIMARY KEY, amount int NOT NULL)")
	if err != nil {
		panic(err)
	}
	store, err := postgres.NewStore(pool, postgres.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	// Publish returns once the message is handled, so the output is in order.
	pubSub := gochannel.NewGoChannel(gochannel.Config{Persistent: true, BlockPublishUntilSubscriberAck: true}, watermill.NopLogger{})
	defer pubSub.Close()
	chain, err := middleware.Defaults(middleware.Config{
		Publisher: pubSub, // in production: a broker.NewPublisher
		Store:     store,  // a *postgres.Store
		Idempotency: middleware.IdempotencyConfig{
			Transactional: true,
			OnDuplicate:   func(msg *message.Message, _, _ string) { fmt.Println("duplicate skipped:", string(msg.Payload)) },
		},
	})
	if err != nil {
		panic(err)
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		panic(err)
	}
	router.AddMiddleware(chain.Middlewares()...)
	router.AddConsumerHandler(topics.ConsumerGroup("payments", "order-placed"), topics.Event("orders", "order-placed"), pubSub,
		func(msg *message.Message) error {
			// The charge is written in the transaction that claimed the message.
			tx, _ := postgres.TxFromContext(msg.Context())
			// A duplicate never gets here: its claim found the mark.
			if _, err := tx.Exec(msg.Context(), "INSERT INTO "+schema+".charges VALUES ($1, 10)", string(msg.Payload)); err != nil {
				return err
			}
			fmt.Println("charged:", string(msg.Payload))
			return nil
		})
	go func() { _ = router.Run(ctx) }()
	<-router.Running()

	for _, m := range []struct{ id, order string }{
		{"0190c5a4-9d7e-7000-8000-000000000011", "order-1"},
		{"0190c5a4-9d7e-7000-8000-000000000012", "order-2"},
		{"0190c5a4-9d7e-7000-8000-000000000011", "order-1"}, // redelivered
	} {
		_ = pubSub.Publish(topics.Event("orders", "order-placed"), message.NewMessage(m.id, []byte(m.order)))
	}
	_ = router.Close()
	_ = chain.Close(ctx)

	var charges int
	_ = pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".charges").Scan(&charges)
	fmt.Println("charges:", charges)
	// Output:
	// charged: order-1
	// charged: order-2
	// duplicate skipped: order-1
	// charges: 2
}
