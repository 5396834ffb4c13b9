package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// exampleLogger logs JSON to stdout without the time and duration, so that
// the examples' output is the same on every run.
func exampleLogger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "duration" {
				return slog.Attr{}
			}
			return a
		},
	}))
}

func ExampleCorrelation() {
	handler := middleware.Correlation(func(msg *message.Message) ([]*message.Message, error) {
		fmt.Println("in the handler:", correlation.FromContext(msg.Context()))
		return []*message.Message{message.NewMessage("receipt-1", nil)}, nil
	})

	msg := message.NewMessage("order-1", nil)
	msg.Metadata.Set(correlation.MetadataKey, "req-42")
	produced, _ := handler(msg)
	fmt.Println("on the returned message:", correlation.FromMessage(produced[0]))
	// Output:
	// in the handler: req-42
	// on the returned message: req-42
}

func ExampleIdempotency() {
	store := idempotency.NewMemoryStore(idempotency.DefaultWindow)
	defer store.Close()

	dedup, err := middleware.Idempotency(store, middleware.IdempotencyConfig{
		// In a router the scope defaults to the handler name.
		Scope: func(*message.Message) string { return "payments.order-placed-consumer" },
	})
	if err != nil {
		panic(err)
	}
	charge := dedup(func(msg *message.Message) ([]*message.Message, error) {
		fmt.Println("charging for", msg.UUID)
		return nil, nil
	})

	const id = "0190c5a4-9d7e-7000-8000-00000000002a"
	_, _ = charge(message.NewMessage(id, []byte(`{"amount":10}`)))
	_, _ = charge(message.NewMessage(id, []byte(`{"amount":10}`))) // Kafka redelivers it
	// Output:
	// charging for 0190c5a4-9d7e-7000-8000-00000000002a
}

// The chain owns the marks that Idempotency makes after an ack (of
// messages whose handler returned messages): Close waits for them before
// the store closes, and refuses the deliveries that come after it.
func ExampleChain_Close() {
	store := idempotency.NewMemoryStore(idempotency.DefaultWindow)
	defer store.Close()
	pubSub := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	defer pubSub.Close()
	chain, err := middleware.Defaults(middleware.Config{
		Publisher: pubSub, // in production: a broker.NewPublisher
		Store:     store,
		Logger:    slog.New(slog.DiscardHandler),
		Idempotency: middleware.IdempotencyConfig{
			Scope: func(*message.Message) string { return "billing.order-placed-consumer" },
		},
	})
	if err != nil {
		panic(err)
	}
	// In a router: router.AddMiddleware(chain.Middlewares()...).
	var handler message.HandlerFunc = func(msg *message.Message) ([]*message.Message, error) {
		fmt.Println("issuing a receipt for", msg.UUID)
		return []*message.Message{message.NewMessage("0190c5a4-9d7e-7000-8000-0000000000f1", nil)}, nil
	}
	mws := chain.Middlewares()
	for i := len(mws) - 1; i >= 0; i-- {
		handler = mws[i](handler)
	}

	msg := message.NewMessage("0190c5a4-9d7e-7000-8000-00000000002d", nil)
	_, _ = handler(msg)
	msg.Ack() // the router acks once it published the receipt: the mark follows
	if err := chain.Close(context.Background()); err != nil {
		panic(err)
	}
	done, _ := store.IsProcessed(context.Background(), idempotency.ScopedKey("billing.order-placed-consumer", msg.UUID))
	fmt.Println("marked after Close:", done)

	late := message.NewMessage("0190c5a4-9d7e-7000-8000-00000000002e", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the router is closing too: the outage is not retried
	late.SetContext(ctx)
	_, err = handler(late)
	fmt.Println("after Close:", errors.Is(err, middleware.ErrClosed))
	// Output:
	// issuing a receipt for 0190c5a4-9d7e-7000-8000-00000000002d
	// marked after Close: true
	// after Close: true
}

func ExampleDeadLetter() {
	pubSub := gochannel.NewGoChannel(gochannel.Config{Persistent: true}, watermill.NopLogger{})
	defer pubSub.Close()

	deadLetter, err := middleware.DeadLetter(pubSub, middleware.DeadLetterConfig{
		// In a router the topic defaults to topics.DeadLetter(handler name).
		Topic: "payments.order-placed-consumer.dlq",
	})
	if err != nil {
		panic(err)
	}
	handler := deadLetter(func(*message.Message) ([]*message.Message, error) {
		return nil, koto.Poison(errors.New("unknown currency XXX"))
	})
	_, err = handler(message.NewMessage("0190c5a4-9d7e-7000-8000-00000000002b", []byte(`{"currency":"XXX"}`)))
	fmt.Println("error for the router:", err) // nil: the message is acked

	letters, _ := pubSub.Subscribe(context.Background(), "payments.order-placed-consumer.dlq")
	dl := <-letters
	dl.Ack()
	fmt.Println(dl.UUID, string(dl.Payload))
	fmt.Println(dl.Metadata.Get("dead_letter_reason"))
	fmt.Println(dl.Metadata.Get("dead_letter_error_class"), dl.Metadata.Get("dead_letter_attempts"))
	// Output:
	// error for the router: <nil>
	// 0190c5a4-9d7e-7000-8000-00000000002b {"currency":"XXX"}
	// unknown currency XXX
	// poison 1
}

func ExampleLogging() {
	handler := middleware.Correlation(middleware.Logging(exampleLogger())(
		func(*message.Message) ([]*message.Message, error) { return nil, nil },
	))
	msg := message.NewMessage("0190c5a4-9d7e-7000-8000-00000000002c", nil)
	msg.Metadata.Set(correlation.MetadataKey, "req-42")
	_, _ = handler(msg)
	// Output:
	// {"level":"DEBUG","msg":"message handled","handler":"","topic":"","message_uuid":"0190c5a4-9d7e-7000-8000-00000000002c","correlation_id":"req-42","outcome":"ok"}
}

func ExampleNewLogHandler() {
	logger := slog.New(middleware.NewLogHandler(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})))
	// Inside a handler behind Correlation, msg.Context() carries the ID.
	ctx := correlation.WithID(context.Background(), "req-42")
	logger.InfoContext(ctx, "charging card", "amount", 10)
	// Output:
	// level=INFO msg="charging card" amount=10 correlation_id=req-42
}

// A router whose handler gets the whole recommended chain. The handler name
// is the consumer group; its poison goes to topics.DeadLetter of it.
func ExampleDefaults() {
	// Publish returns once the message is handled, so the output is in order.
	pubSub := gochannel.NewGoChannel(gochannel.Config{Persistent: true, BlockPublishUntilSubscriberAck: true}, watermill.NopLogger{})
	defer pubSub.Close()
	store := idempotency.NewMemoryStore(idempotency.DefaultWindow)
	defer store.Close()

	chain, err := middleware.Defaults(middleware.Config{
		Publisher: pubSub, // in production: a broker.NewPublisher
		Store:     store,  // in production: a postgres.NewStore
		Logger:    exampleLogger(),
	})
	if err != nil {
		panic(err)
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		panic(err)
	}
	router.AddMiddleware(chain.Middlewares()...)

	group := topics.ConsumerGroup("payments", "order-placed")
	router.AddConsumerHandler(group, topics.Event("orders", "order-placed"), pubSub, func(msg *message.Message) error {
		if string(msg.Payload) == "not json" {
			return koto.Poison(errors.New("cannot decode"))
		}
		return nil
	})
	go func() { _ = router.Run(context.Background()) }()
	<-router.Running()

	for _, m := range []struct{ id, payload string }{
		{"0190c5a4-9d7e-7000-8000-000000000001", `{"id":1}`},
		{"0190c5a4-9d7e-7000-8000-000000000002", "not json"},
		{"0190c5a4-9d7e-7000-8000-000000000001", `{"id":1}`}, // again
		{"0190c5a4-9d7e-7000-8000-000000000003", `{"id":3}`},
	} {
		msg := message.NewMessage(m.id, []byte(m.payload))
		msg.Metadata.Set(correlation.MetadataKey, "req-42")
		_ = pubSub.Publish(topics.Event("orders", "order-placed"), msg)
	}

	letters, _ := pubSub.Subscribe(context.Background(), topics.DeadLetter(group))
	dl := <-letters
	dl.Ack()
	fmt.Println("dead letter:", dl.UUID, dl.Metadata.Get("dead_letter_reason"))
	// The router first, then the chain (it waits for pending marks), then
	// the store (deferred above).
	_ = router.Close()
	_ = chain.Close(context.Background())
	// Output:
	// {"level":"DEBUG","msg":"message handled","handler":"payments.order-placed-consumer","topic":"orders.order-placed","message_uuid":"0190c5a4-9d7e-7000-8000-000000000001","correlation_id":"req-42","outcome":"ok"}
	// {"level":"ERROR","msg":"message handled","handler":"payments.order-placed-consumer","topic":"orders.order-placed","message_uuid":"0190c5a4-9d7e-7000-8000-000000000002","correlation_id":"req-42","outcome":"dead-lettered","error":"cannot decode","error_class":"poison","dead_letter_topic":"payments.order-placed-consumer.dlq"}
	// {"level":"DEBUG","msg":"message handled","handler":"payments.order-placed-consumer","topic":"orders.order-placed","message_uuid":"0190c5a4-9d7e-7000-8000-000000000001","correlation_id":"req-42","outcome":"duplicate","idempotency_scope":"payments.order-placed-consumer","idempotency_key":"0190c5a4-9d7e-7000-8000-000000000001"}
	// {"level":"DEBUG","msg":"message handled","handler":"payments.order-placed-consumer","topic":"orders.order-placed","message_uuid":"0190c5a4-9d7e-7000-8000-000000000003","correlation_id":"req-42","outcome":"ok"}
	// dead letter: 0190c5a4-9d7e-7000-8000-000000000002 cannot decode
}
