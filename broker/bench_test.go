package broker_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// BenchmarkRouterNoopHandler measures consumption through a Watermill
// router with a no-op handler on a 4-partition topic of 1 000 keys, the
// reference pipeline of the end-to-end benchmarks, one message per
// partition at a time and with Concurrency 32. The records are written
// beforehand with franz-go so that only consumption is timed.
func BenchmarkRouterNoopHandler(b *testing.B) {
	for name, concurrency := range map[string]int{"one at a time": 0, "concurrent 32": 32} {
		b.Run(name, func(b *testing.B) { benchRouterNoop(b, concurrency) })
	}
}

func benchRouterNoop(b *testing.B, concurrency int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*kototest.DefaultTimeout)
	defer cancel()
	brokers := kototest.Brokers(b)
	topic := kototest.NewTopic(b, provisionCfg(brokers, 4), "bench")
	fill(ctx, b, brokers, topic, b.N)

	var handled atomic.Int64
	done := make(chan struct{})
	router, sub := benchRouter(b, broker.Config{Brokers: brokers, Concurrency: concurrency}, topic, func(*message.Message) error {
		if handled.Add(1) == int64(b.N) {
			close(done)
		}
		return nil
	})
	defer sub.Close()
	b.ResetTimer()
	go func() { _ = router.Run(ctx) }()
	select {
	case <-done:
	case <-ctx.Done():
		b.Fatalf("handled %d of %d messages: %v", handled.Load(), b.N, ctx.Err())
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
	_ = router.Close()
}

func benchRouter(b *testing.B, cfg broker.Config, topic string, h message.NoPublishHandlerFunc) (*message.Router, *broker.Subscriber) {
	b.Helper()
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		b.Fatalf("NewRouter: %v", err)
	}
	cfg.ConsumerGroup = kototest.Group(b, "bench")
	sub, err := broker.NewSubscriber(cfg)
	if err != nil {
		b.Fatalf("NewSubscriber: %v", err)
	}
	router.AddConsumerHandler("noop", topic, sub, h)
	return router, sub
}

// fill writes n small records with a Watermill UUID header, of 1 000
// keys spread over the partitions.
func fill(ctx context.Context, b *testing.B, brokers []string, topic string, n int) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		b.Fatalf("kgo.NewClient: %v", err)
	}
	defer cl.Close()
	const batch = 10_000
	for start := 0; start < n; start += batch {
		recs := make([]*kgo.Record, 0, min(batch, n-start))
		for i := start; i < n && i < start+batch; i++ {
			recs = append(recs, &kgo.Record{
				Key:     []byte("key-" + strconv.Itoa(i%1000)),
				Value:   []byte("payload-" + strconv.Itoa(i)),
				Headers: []kgo.RecordHeader{{Key: kafka.UUIDHeaderKey, Value: []byte(watermill.NewUUID())}},
			})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatalf("fill %s: %v", topic, err)
		}
	}
}

// BenchmarkPublishParallel measures the publisher with the package defaults
// (idempotent, acks=all), publishing from several goroutines as a service
// handling concurrent requests does.
func BenchmarkPublishParallel(b *testing.B) {
	brokers := kototest.Brokers(b)
	topic := kototest.Topic(b, "bench-pub")
	pub, err := broker.NewPublisher(broker.Config{Brokers: brokers})
	if err != nil {
		b.Fatalf("NewPublisher: %v", err)
	}
	defer pub.Close()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), []byte("payload"))); err != nil {
				b.Errorf("Publish: %v", err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}
