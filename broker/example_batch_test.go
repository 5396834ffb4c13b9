package broker_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
)

// A batch subscriber hands out a partition's messages together, as one
// message whose context carries them. Each member is settled on its own,
// then the batch message; middleware.BatchDefaults does this for a router.
func ExampleNewBatchSubscriber() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kafkaBroker, err := embedded.Start(ctx, embedded.WithPartitions(1))
	if err != nil {
		log.Fatal(err)
	}
	defer kafkaBroker.Close()
	cfg := broker.Config{Brokers: kafkaBroker.Addrs()}

	pub, err := broker.NewPublisher(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	for _, e := range [][2]string{{"order-1", "placed"}, {"order-2", "placed"}, {"order-1", "paid"}} {
		msg := message.NewMessage(watermill.NewUUID(), []byte(e[1]))
		msg.Metadata.Set(koto.PartitionKeyMetadataKey, e[0])
		if err := pub.Publish("orders.events", msg); err != nil {
			log.Fatal(err)
		}
	}

	cfg.ConsumerGroup = "ledger"
	// The batch is handed out once it holds 3 messages; MaxWait is long so
	// that it cannot go out earlier.
	cfg.Batch = broker.BatchConfig{MaxMessages: 3, MaxWait: time.Minute}
	sub, err := broker.NewBatchSubscriber(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	batches, err := sub.Subscribe(ctx, "orders.events")
	if err != nil {
		log.Fatal(err)
	}
	msg := <-batches
	batch, _ := koto.BatchFromContext(msg.Context())
	fmt.Println(len(batch.Messages), "messages, handed out by", batch.Reason)
	for i, m := range batch.Messages {
		fmt.Println(m.Metadata.Get(koto.PartitionKeyMetadataKey), string(m.Payload))
		batch.Ack(i) // handled: its offset is done
	}
	msg.Ack()
	// Output:
	// 3 messages, handed out by count
	// order-1 placed
	// order-2 placed
	// order-1 paid
}
