package cqrs_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wcqrs "github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/koto-dev/watermill-koto/cqrs"
)

type stockReserved struct {
	SKU string `json:"sku"`
	N   int    `json:"n"`
}

// TestWatermillEventProcessorReadsPublishedEvents checks the format
// promise of the package doc: Watermill's own CQRS event processor, with
// its JSONMarshaler, decodes and routes what EventPublisher writes.
func TestWatermillEventProcessorReadsPublishedEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logger := watermill.NopLogger{}
	pubsub := gochannel.NewGoChannel(gochannel.Config{Persistent: true}, logger)
	defer pubsub.Close()
	router, err := message.NewRouter(message.RouterConfig{}, logger)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *stockReserved, 1)
	processor, err := wcqrs.NewEventProcessorWithConfig(router, wcqrs.EventProcessorConfig{
		GenerateSubscribeTopic: func(p wcqrs.EventProcessorGenerateSubscribeTopicParams) (string, error) {
			return "stock.stock-reserved", nil
		},
		SubscriberConstructor: func(wcqrs.EventProcessorSubscriberConstructorParams) (message.Subscriber, error) {
			return pubsub, nil
		},
		Marshaler: wcqrs.JSONMarshaler{GenerateName: func(any) string { return "stock-reserved" }},
		Logger:    logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = processor.AddHandlers(wcqrs.NewEventHandler("reserved", func(_ context.Context, ev *stockReserved) error {
		got <- ev
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = router.Run(ctx) }()
	defer router.Close()
	<-router.Running()

	pub, err := cqrs.NewEventPublisher(pubsub, cqrs.EventPublisherConfig{Service: "stock"})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, stockReserved{SKU: "A-1", N: 3}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-got:
		if ev.SKU != "A-1" || ev.N != 3 {
			t.Errorf("Watermill's processor decoded %+v, want {A-1 3}", *ev)
		}
	case <-ctx.Done():
		t.Fatal("Watermill's event processor did not handle the published event")
	}
}
