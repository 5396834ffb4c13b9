package middleware_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// A router handler that takes a batch subscriber's batches: the handler
// gets the batch's messages at once, a message published twice only once,
// and the chain settles each message on its own.
func ExampleBatchDefaults() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kafka, err := embedded.Start(ctx, embedded.WithPartitions(1))
	if err != nil {
		panic(err)
	}
	defer kafka.Close()
	pub, err := broker.NewPublisher(broker.Config{Brokers: kafka.Addrs()})
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	store := idempotency.NewMemoryStore(idempotency.DefaultWindow)
	defer store.Close()

	placed := watermill.NewUUID()
	for _, m := range []struct{ id, key, payload string }{
		{placed, "order-1", "order-1 placed"},
		{watermill.NewUUID(), "order-2", "order-2 placed"},
		{placed, "order-1", "order-1 placed"}, // published again
		{watermill.NewUUID(), "order-1", "order-1 paid"},
	} {
		msg := message.NewMessage(m.id, []byte(m.payload))
		msg.Metadata.Set(koto.PartitionKeyMetadataKey, m.key)
		if err := pub.Publish(topics.Event("orders", "order-placed"), msg); err != nil {
			panic(err)
		}
	}

	skipped := make(chan string, 1)
	chain, err := middleware.BatchDefaults(middleware.Config{
		Publisher: pub,   // for dead letters
		Store:     store, // in production: a postgres.Store
		Logger:    slog.New(slog.DiscardHandler),
		Idempotency: middleware.IdempotencyConfig{
			OnDuplicate: func(msg *message.Message, _, _ string) { skipped <- string(msg.Payload) },
		},
	}, middleware.BatchConfig{})
	if err != nil {
		panic(err)
	}
	// One batch of the four messages: MaxWait is long so that it cannot
	// go out before it is full.
	sub, err := broker.NewBatchSubscriber(broker.Config{Brokers: kafka.Addrs(), ConsumerGroup: "billing.order-placed-consumer",
		Batch: broker.BatchConfig{MaxMessages: 4, MaxWait: time.Minute}})
	if err != nil {
		panic(err)
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		panic(err)
	}
	batches := make(chan []string, 1)
	router.AddConsumerHandler("billing.order-placed-consumer", topics.Event("orders", "order-placed"), sub,
		chain.Handler(func(ctx context.Context, msgs []*message.Message) error {
			var payloads []string
			for _, msg := range msgs {
				payloads = append(payloads, string(msg.Payload))
			}
			batches <- payloads
			return nil
		}))
	go func() { _ = router.Run(ctx) }()
	<-router.Running()

	fmt.Printf("handled %q\n", <-batches)
	fmt.Println("duplicate skipped:", <-skipped)
	_ = router.Close() // closes the subscriber too
	_ = chain.Close(ctx)
	// Output:
	// handled ["order-1 placed" "order-2 placed" "order-1 paid"]
	// duplicate skipped: order-1 placed
}
