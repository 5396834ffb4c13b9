package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/parking"
	"github.com/koto-dev/watermill-koto/topics"
)

// A shipping consumer whose carrier asks it to come back later: the
// handler returns koto.RetryAfter, the message is parked at once, its
// partition moves on, and the parking store brings it back through its
// topic after the delay. The example runs against the PostgreSQL at
// DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable), in a schema of
// its own that it drops at the end, and an embedded Kafka broker.
func ExampleParkingConfig() {
	ctx := context.Background()
	pool, schema := pgtest.ExampleDatabase(ctx)
	defer pool.Close()
	defer pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	kafka, err := embedded.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer kafka.Close()
	brokers := broker.Config{Brokers: kafka.Addrs()}

	// Parked messages come back through the outbox: its forwarder must run.
	box, err := outbox.New(pool, outbox.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	parked, err := parking.NewStore(pool, box, parking.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	if err := box.Setup(ctx); err != nil {
		panic(err)
	}
	if err := parked.Setup(ctx); err != nil {
		panic(err)
	}
	fwd, err := outbox.NewForwarder(box, outbox.ForwarderConfig{Broker: brokers, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	go fwd.Run(ctx)
	defer fwd.Close()

	pub, err := broker.NewPublisher(brokers)
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	chain, err := middleware.Defaults(middleware.Config{
		Publisher: pub,
		Logger:    slog.New(slog.DiscardHandler),
		DeadLetter: middleware.DeadLetterConfig{Parking: middleware.ParkingConfig{
			Store:  parked,
			Delays: []time.Duration{time.Minute, 30 * time.Minute},
		}},
	})
	if err != nil {
		panic(err)
	}
	group := topics.ConsumerGroup("shipping", "order-paid")
	sub, err := broker.NewSubscriber(broker.Config{Brokers: kafka.Addrs(), ConsumerGroup: group})
	if err != nil {
		panic(err)
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		panic(err)
	}
	router.AddMiddleware(chain.Middlewares()...)
	attempts := make(chan string, 2)
	router.AddConsumerHandler(group, topics.Event("orders", "order-paid"), sub, func(msg *message.Message) error {
		if msg.Metadata.Get(middleware.ParkedIDKey) == "" {
			attempts <- "first attempt: the carrier says come back in 100ms"
			return koto.RetryAfter(errors.New("carrier busy"), 100*time.Millisecond)
		}
		attempts <- "back from parking: shipped"
		return nil
	})
	go func() { _ = router.Run(ctx) }()
	<-router.Running()

	msg := message.NewMessage(watermill.NewUUID(), []byte(`{"order_id":"order-1"}`))
	msg.Metadata.Set(koto.PartitionKeyMetadataKey, "order-1")
	if err := pub.Publish(topics.Event("orders", "order-paid"), msg); err != nil {
		panic(err)
	}
	fmt.Println(<-attempts)
	fmt.Println(<-attempts)
	_ = router.Close() // closes the subscriber too
	_ = chain.Close(ctx)
	// Output:
	// first attempt: the carrier says come back in 100ms
	// back from parking: shipped
}
