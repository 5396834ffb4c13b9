package embedded_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker/embedded"
)

func ExampleStart() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	b, err := embedded.Start(ctx, embedded.WithPartitions(1), embedded.WithTopics("greetings"))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	// Any Kafka client connects to b.Addrs(); here, franz-go.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumeTopics("greetings"))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()

	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "greetings", Value: []byte("hello")}).FirstErr(); err != nil {
		log.Fatal(err)
	}
	fetches := cl.PollFetches(ctx)
	fetches.EachRecord(func(r *kgo.Record) {
		fmt.Printf("%s from partition %d\n", r.Value, r.Partition)
	})
	// Output: hello from partition 0
}
