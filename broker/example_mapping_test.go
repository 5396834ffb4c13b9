package broker_test

import (
	"fmt"
	"log"
	"os"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
)

// A service whose events are CloudEvents with reverse-DNS types: the
// record an event becomes, in binary content mode.
func ExampleNewCloudEventsMarshaler() {
	marshaler, err := broker.NewCloudEventsMarshaler(broker.CloudEventsConfig{
		Source: "/orders",
		Types:  broker.TypeNames{Prefix: "com.example.shop."},
	})
	if err != nil {
		log.Fatal(err)
	}
	cfg := broker.Config{Brokers: broker.SplitBrokers(os.Getenv("KAFKA_BROKERS")), Marshaler: marshaler}
	_ = cfg // for broker.NewPublisher, broker.NewSubscriber, a cqrs.ServiceConfig...

	msg := message.NewMessage("0190c5a4-9d7e-7000-8000-00000000002a", []byte(`{"orderId":"o-7"}`))
	msg.Metadata.Set(koto.TypeNameMetadataKey, "order-placed")
	msg.Metadata.Set(koto.PartitionKeyMetadataKey, "o-7")
	msg.Metadata.Set("ce_time", "2026-03-04T05:06:07Z") // the time of writing, when not set
	rec, err := marshaler.Marshal("orders.order-placed", msg)
	if err != nil {
		log.Fatal(err)
	}
	key, _ := rec.Key.Encode()
	fmt.Printf("key %s\n", key)
	for _, h := range rec.Headers {
		fmt.Printf("%s: %s\n", h.Key, h.Value)
	}
	// Output:
	// key o-7
	// ce_specversion: 1.0
	// ce_id: 0190c5a4-9d7e-7000-8000-00000000002a
	// ce_source: /orders
	// ce_type: com.example.shop.order-placed
	// ce_time: 2026-03-04T05:06:07Z
	// content-type: application/json
	// ce_partitionkey: o-7
}

// A Go service consuming the events of a .NET service on Wolverine: the
// envelope's id is the message UUID and its message-type, the .NET type's
// full name, the Go type name.
func ExampleNewWolverineMarshaler() {
	marshaler, err := broker.NewWolverineMarshaler(broker.WolverineConfig{
		Source: "payments",
		Types:  broker.TypeNames{Names: map[string]string{"order-placed": "Shop.Contracts.OrderPlaced"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	rec := &sarama.ConsumerMessage{Key: []byte("o-7"), Value: []byte(`{"OrderId":"o-7"}`)}
	for _, h := range [][2]string{
		{"id", "5b1c3e1a-2f4d-4c6e-9a8b-7d6e5f4a3b2c"}, {"correlation-id", "corr-1"},
		{"message-type", "Shop.Contracts.OrderPlaced"}, {"source", "orders-api"},
	} {
		rec.Headers = append(rec.Headers, &sarama.RecordHeader{Key: []byte(h[0]), Value: []byte(h[1])})
	}
	msg, err := marshaler.Unmarshal(rec) // as a subscriber does
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(msg.UUID)
	fmt.Println(msg.Metadata.Get(koto.TypeNameMetadataKey), msg.Metadata.Get("correlation_id"), msg.Metadata.Get("source"))
	// Output:
	// 5b1c3e1a-2f4d-4c6e-9a8b-7d6e5f4a3b2c
	// order-placed corr-1 orders-api
}
