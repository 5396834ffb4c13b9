package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"sync/atomic"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/deadletter"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// List the dead letters of payments' order-placed consumer, then replay
// those that failed on one bug once it is fixed. A second replay sends
// nothing: the replay group records what was sent.
func ExampleQueue_Replay() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, fixed, stop := runPayments(ctx) // dead-letters every order until fixed
	defer stop()
	group := topics.ConsumerGroup("payments", "order-placed")

	q, err := deadletter.NewQueue(deadletter.Config{Broker: cfg, ConsumerGroup: group})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	letters := waitForLetters(ctx, q, 2)
	for _, l := range letters {
		fmt.Printf("%s %q from %s\n", l.TypeName, l.Reason, l.OriginalTopic)
	}

	fixed.Store(true) // the bug is fixed and deployed
	bug := deadletter.Filter{Reason: "amount is negative"}
	res, err := q.Replay(ctx, bug, deadletter.ReplayOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("replay sent %d to %s\n", res.Sent, letters[0].OriginalTopic)
	res, err = q.Replay(ctx, bug, deadletter.ReplayOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("replay again sent %d (%d already replayed)\n", res.Sent, res.AlreadyReplayed)
	// Output:
	// order-placed "amount is negative" from orders.order-placed
	// order-placed "amount is negative" from orders.order-placed
	// replay sent 2 to orders.order-placed
	// replay again sent 0 (2 already replayed)
}

// A dry run shows what a replay would send, without sending or recording
// anything.
func ExampleQueue_Replay_dryRun() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, _, stop := runPayments(ctx)
	defer stop()
	group := topics.ConsumerGroup("payments", "order-placed")

	q, err := deadletter.NewQueue(deadletter.Config{Broker: cfg, ConsumerGroup: group})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	waitForLetters(ctx, q, 2)
	res, err := q.Replay(ctx, deadletter.Filter{Limit: 1}, deadletter.ReplayOptions{
		DryRun: true,
		Progress: func(p deadletter.ReplayProgress) {
			for _, r := range p.Sent {
				fmt.Printf("would send %s (%s) to %s\n", r.TypeName, r.Reason, r.ToTopic)
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("dry run: %d of the selected would go\n", res.Sent)
	// Output:
	// would send order-placed (amount is negative) to orders.order-placed
	// dry run: 1 of the selected would go
}

// Discard a dead letter that must never be replayed, found by its
// position: a replay of everything then passes over it, and the listing
// shows it discarded. Nothing is deleted from Kafka.
func ExampleQueue_Discard() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, fixed, stop := runPayments(ctx)
	defer stop()
	group := topics.ConsumerGroup("payments", "order-placed")

	q, err := deadletter.NewQueue(deadletter.Config{Broker: cfg, ConsumerGroup: group})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	junk := waitForLetters(ctx, q, 2)[0].Position() // say, a test order
	res, err := q.Discard(ctx, deadletter.Filter{Positions: []deadletter.Position{junk}}, deadletter.ReplayOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("discarded %d\n", res.Discarded)

	fixed.Store(true)
	res, err = q.Replay(ctx, deadletter.Filter{}, deadletter.ReplayOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("replay sent %d, passed over %d discarded\n", res.Sent, res.AlreadyDiscarded)
	letters, err := q.List(ctx, deadletter.Filter{})
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range letters {
		fmt.Printf("replayed %v, discarded %v\n", l.Replayed, l.Discarded)
	}
	// Output:
	// discarded 1
	// replay sent 1, passed over 1 discarded
	// replayed false, discarded true
	// replayed true, discarded false
}

// runPayments starts an embedded Kafka broker and payments' consumer of
// order-placed behind middleware.Defaults, publishes two orders that it
// cannot handle until fixed is set, and returns the broker's configuration,
// fixed and a function that stops it all.
func runPayments(ctx context.Context) (cfg broker.Config, fixed *atomic.Bool, stop func()) {
	kafka, err := embedded.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	cfg = broker.Config{Brokers: kafka.Addrs()}
	group := topics.ConsumerGroup("payments", "order-placed")
	fixed = new(atomic.Bool)
	topic := topics.Event("orders", "order-placed")
	if err := broker.ProvisionTopics(ctx, cfg, topic, topics.DeadLetter(group)); err != nil {
		log.Fatal(err)
	}
	pub, err := broker.NewPublisher(cfg)
	if err != nil {
		log.Fatal(err)
	}
	subCfg := cfg
	subCfg.ConsumerGroup = group
	sub, err := broker.NewSubscriber(subCfg)
	if err != nil {
		log.Fatal(err)
	}
	chain, err := middleware.Defaults(middleware.Config{
		Publisher:  pub,
		Logger:     slog.New(slog.DiscardHandler),
		DeadLetter: middleware.DeadLetterConfig{MaxAttempts: 1}, // dead-letter the first failure
	})
	if err != nil {
		log.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{}, nil)
	if err != nil {
		log.Fatal(err)
	}
	router.AddConsumerHandler(group, topic, sub, func(*message.Message) error {
		if !fixed.Load() {
			return errors.New("amount is negative")
		}
		return nil
	}).AddMiddleware(chain.Middlewares()...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = router.Run(context.Background())
	}()
	<-router.Running()
	for _, order := range []string{"o-1", "o-2"} {
		msg := message.NewMessage(watermill.NewUUID(), []byte(`{"order":"`+order+`","amount":-5}`))
		msg.Metadata.Set(koto.TypeNameMetadataKey, "order-placed")
		msg.Metadata.Set(koto.PartitionKeyMetadataKey, "customer-7")
		if err := pub.Publish(topic, msg); err != nil {
			log.Fatal(err)
		}
	}
	return cfg, fixed, func() {
		_ = router.Close()
		<-done
		_ = chain.Close(context.Background())
		_ = pub.Close()
		_ = kafka.Close()
	}
}

// waitForLetters polls q until it lists n dead letters.
func waitForLetters(ctx context.Context, q *deadletter.Queue, n int) []*deadletter.Letter {
	for {
		letters, err := q.List(ctx, deadletter.Filter{})
		if err != nil {
			log.Fatal(err)
		}
		if len(letters) >= n {
			return letters
		}
		time.Sleep(20 * time.Millisecond)
	}
}
