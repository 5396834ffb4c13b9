package broker_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
)

// BenchmarkMappings writes and reads back one event with the metadata cqrs
// and telemetry give it, with each record mapping; the default mapping is
// the baseline of the same run.
func BenchmarkMappings(b *testing.B) {
	ce, err := broker.NewCloudEventsMarshaler(broker.CloudEventsConfig{Source: "/orders", Types: broker.TypeNames{Prefix: "com.example.shop."}})
	if err != nil {
		b.Fatal(err)
	}
	wolverine, err := broker.NewWolverineMarshaler(broker.WolverineConfig{Source: "orders"})
	if err != nil {
		b.Fatal(err)
	}
	for _, bm := range []struct {
		name string
		m    kafka.MarshalerUnmarshaler
	}{{"default", broker.NewPartitionKeyMarshaler()}, {"cloudevents", ce}, {"wolverine", wolverine}} {
		b.Run(bm.name, func(b *testing.B) {
			msg := message.NewMessage(ceID, []byte(`{"orderId":"o-7","total":42.5}`))
			msg.Metadata = message.Metadata{"name": "order-placed", "correlation_id": "corr-1", "traceparent": ceTraceParent, "partition_key": "o-7"}
			b.ReportAllocs()
			for b.Loop() {
				rec, err := bm.m.Marshal("orders.order-placed", msg)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := bm.m.Unmarshal(consumed(b, rec)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
