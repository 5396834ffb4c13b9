package cqrs_test

import (
	"context"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestNoKafka: with no broker listening, what connects reports the refused
// connection.
func TestNoKafka(t *testing.T) {
	cfg := broker.Config{Brokers: []string{kototest.ClosedAddr(t)}}
	ctx := kototest.Context(t)

	svc, err := cqrs.NewService(cqrs.ServiceConfig{Name: "billing", Broker: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(ctx)
	router := kototest.NewRouter(t, nil)
	kototest.WantRefused(t, "Service.Register", svc.Register(ctx, router, cqrs.NewEventConsumer(func(context.Context, *StockReserved) error { return nil }, cqrs.From("inventory"))))

	pub := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	defer pub.Close()
	d, err := cqrs.NewCommandDispatcher(pub, cqrs.CommandDispatcherConfig{Service: "billing", Broker: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	kototest.WantRefused(t, "CommandDispatcher.Start", d.Start(ctx))
}
