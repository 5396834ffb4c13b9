package embedded_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// A test makes the broker refuse every produce to one topic until the
// fault is removed, through the kfake cluster of Broker.Cluster.
func ExampleBroker_Cluster() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := embedded.Start(ctx, embedded.WithTopics("payments.paid"))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	fault := b.Cluster().Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.Produce},
		Topic: "payments.paid",
		Count: -1, // until Remove
		Err:   kerr.NotEnoughReplicas,
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RecordRetries(0))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "payments.paid", Value: []byte("7")}).FirstErr()
	fmt.Println(err != nil)

	fault.Remove()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "payments.paid", Value: []byte("7")}).FirstErr()
	fmt.Println(err)
	// Output:
	// true
	// <nil>
}
