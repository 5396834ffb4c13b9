package kototest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// BenchmarkHarness measures, per iteration, what a test of a service
// pays: New and Run (start to ready), one message published and handled
// behind middleware.Defaults, and Wait; and reports how long after the
// handler's return Wait returned (wait-after-ack-ms).
func BenchmarkHarness(b *testing.B) {
	var ready, roundTrip, afterAck time.Duration
	for b.Loop() {
		start := time.Now()
		h := kototest.New(b, kototest.WithoutPostgres())
		pub, err := broker.NewPublisher(h.Broker())
		if err != nil {
			b.Fatal(err)
		}
		h.Defer(func() { _ = pub.Close() })
		chain, err := middleware.Defaults(middleware.Config{Publisher: pub, Logger: h.Logger()})
		if err != nil {
			b.Fatal(err)
		}
		sub, err := broker.NewSubscriber(broker.Config{Brokers: h.Broker().Brokers, ConsumerGroup: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		var returned atomic.Int64
		h.Router().AddConsumerHandler("bench", "bench.topic", sub, func(*message.Message) error {
			returned.Store(time.Now().UnixNano())
			return nil
		}).AddMiddleware(chain.Middlewares()...)
		h.Run()
		ready += time.Since(start)

		sent := time.Now()
		if err := pub.Publish("bench.topic", message.NewMessage(watermill.NewUUID(), []byte("{}"))); err != nil {
			b.Fatal(err)
		}
		h.Wait()
		done := time.Now()
		roundTrip += done.Sub(sent)
		afterAck += done.Sub(time.Unix(0, returned.Load()))
		_ = chain.Close(context.Background())
	}
	n := float64(b.N)
	b.ReportMetric(float64(ready.Milliseconds())/n, "ready-ms")
	b.ReportMetric(float64(roundTrip.Milliseconds())/n, "round-trip-ms")
	b.ReportMetric(float64(afterAck.Microseconds())/n/1000, "wait-after-ack-ms")
}
