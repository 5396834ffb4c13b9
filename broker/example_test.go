package broker_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/topics"
)

// Events of one order carry the order ID as partition key, so they share a
// partition and a subscriber sees them in publish order.
func ExampleNewPublisher() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kafkaBroker, err := embedded.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer kafkaBroker.Close()

	pub, err := broker.NewPublisher(broker.Config{Brokers: kafkaBroker.Addrs()})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	for _, event := range []string{"placed", "paid", "shipped"} {
		msg := message.NewMessage(watermill.NewUUID(), []byte(event))
		msg.Metadata.Set(koto.PartitionKeyMetadataKey, "order-42")
		if err := pub.Publish("orders.events", msg); err != nil {
			log.Fatal(err)
		}
	}

	sub, err := broker.NewSubscriber(broker.Config{Brokers: kafkaBroker.Addrs(), ConsumerGroup: "shipping"})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	msgs, err := sub.Subscribe(ctx, "orders.events")
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		msg := <-msgs
		fmt.Println(msg.Metadata.Get(koto.PartitionKeyMetadataKey), string(msg.Payload))
		msg.Ack()
	}
	// Output:
	// order-42 placed
	// order-42 paid
	// order-42 shipped
}

// Publish gives up at the deadline of the message's context, whatever the
// broker does; here it is gone.
func ExamplePublisher_Publish() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kafkaBroker, err := embedded.Start(ctx, embedded.WithTopics("orders.events"))
	if err != nil {
		log.Fatal(err)
	}
	pub, err := broker.NewPublisher(broker.Config{Brokers: kafkaBroker.Addrs()})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close() // waits until the producer gives up on the record
	_ = kafkaBroker.Close()

	deadline, cancelSend := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelSend()
	msg := message.NewMessage(watermill.NewUUID(), []byte("placed"))
	msg.SetContext(deadline)
	err = pub.Publish("orders.events", msg)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output: true
}

// A consumer group that subscribes after a message was published still
// receives it: new groups start at the oldest offset.
func ExampleNewSubscriber() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kafkaBroker, err := embedded.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer kafkaBroker.Close()

	pub, err := broker.NewPublisher(broker.Config{Brokers: kafkaBroker.Addrs()})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Publish("payments.paid", message.NewMessage(watermill.NewUUID(), []byte("payment 7"))); err != nil {
		log.Fatal(err)
	}

	sub, err := broker.NewSubscriber(broker.Config{
		Brokers:       kafkaBroker.Addrs(),
		ConsumerGroup: "ledger.paid-consumer",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	msgs, err := sub.Subscribe(ctx, "payments.paid")
	if err != nil {
		log.Fatal(err)
	}
	msg := <-msgs
	fmt.Println(string(msg.Payload))
	msg.Ack()
	// Output: payment 7
}

func ExampleProvisionTopics() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kafkaBroker, err := embedded.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer kafkaBroker.Close()

	cfg := broker.Config{
		Brokers:   kafkaBroker.Addrs(),
		Provision: broker.ProvisionConfig{Partitions: 6, TopicConfigs: map[string]string{"retention.ms": "604800000"}},
	}
	// Safe at every start of every instance: existing topics are left alone.
	err = broker.ProvisionTopics(ctx, cfg, "orders.order-placed", "orders.order-placed")
	fmt.Println(err)

	// Invalid names fail before anything is sent to Kafka.
	err = broker.ProvisionTopics(ctx, cfg, "orders/order-placed")
	fmt.Println(errors.Is(err, topics.ErrInvalid))
	// Output:
	// <nil>
	// true
}

// A tail reader sees what is published after it starts, on every partition,
// without a consumer group: every reader of the topic gets every message.
func ExampleNewTailReader() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kafkaBroker, err := embedded.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer kafkaBroker.Close()
	cfg := broker.Config{Brokers: kafkaBroker.Addrs()}
	if err := broker.ProvisionTopics(ctx, cfg, "orders.replies"); err != nil {
		log.Fatal(err)
	}

	replies := make(chan *message.Message, 1)
	reader, err := broker.NewTailReader(cfg, "orders.replies", func(msg *message.Message) { replies <- msg })
	if err != nil {
		log.Fatal(err)
	}
	defer reader.Close()
	if err := reader.Start(ctx); err != nil {
		log.Fatal(err)
	}

	pub, err := broker.NewPublisher(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Publish("orders.replies", message.NewMessage(watermill.NewUUID(), []byte("stock reserved"))); err != nil {
		log.Fatal(err)
	}
	fmt.Println(string((<-replies).Payload))
	// Output: stock reserved
}

// A Producer sends what a Watermill publisher cannot in one call: here a
// batch of messages for two topics, marshaled as NewPublisher would, which
// a tool such as an outbox forwarder needs.
func ExampleNewProducer() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kafkaBroker, err := embedded.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer kafkaBroker.Close()
	cfg := broker.Config{Brokers: kafkaBroker.Addrs()}

	producer, err := broker.NewProducer(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer producer.Close()
	var batch []*sarama.ProducerMessage
	for _, topic := range []string{"orders.order-placed", "payments.payment-requested"} {
		msg := message.NewMessage(watermill.NewUUID(), []byte("order o-1"))
		msg.Metadata.Set(koto.PartitionKeyMetadataKey, "o-1")
		rec, err := producer.Marshaler.Marshal(topic, msg)
		if err != nil {
			log.Fatal(err)
		}
		batch = append(batch, rec)
	}
	if err := producer.SendMessages(batch); err != nil { // all written, or an error per failed record
		log.Fatal(err)
	}

	// NewSaramaClient reads a partition from an offset, without a group.
	client, err := broker.NewSaramaClient(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close()
	for _, rec := range batch { // SendMessages set each record's partition and offset
		pc, err := consumer.ConsumePartition(rec.Topic, rec.Partition, rec.Offset)
		if err != nil {
			log.Fatal(err)
		}
		got := <-pc.Messages()
		_ = pc.Close()
		fmt.Printf("%s: %s, key %s\n", got.Topic, got.Value, got.Key)
	}
	// Output:
	// orders.order-placed: order o-1, key o-1
	// payments.payment-requested: order o-1, key o-1
}
