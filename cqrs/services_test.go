package cqrs_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	wcqrs "github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

// OrderPlacedEvent is published by orders; its partition key is the order.
type OrderPlacedEvent struct {
	OrderID string `json:"orderId"`
	Amount  int    `json:"amount"`
}

func (e OrderPlacedEvent) PartitionKey() string { return e.OrderID }

// PaymentProcessed is published by payments.
type PaymentProcessed struct {
	OrderID string `json:"orderId"`
}

// seen is what a handler observed about one message.
type seen struct {
	handler, topic         string
	ctxCorrelation         string
	msgCorrelation         string
	msgUUID, name, partKey string
	orderID                string
}

func observe(ctx context.Context, orderID string) seen {
	msg := wcqrs.OriginalMessageFromCtx(ctx)
	return seen{
		handler:        message.HandlerNameFromCtx(ctx),
		topic:          message.SubscribeTopicFromCtx(ctx),
		ctxCorrelation: correlation.FromContext(ctx),
		msgCorrelation: correlation.FromMessage(msg),
		msgUUID:        msg.UUID,
		name:           msg.Metadata.Get(koto.TypeNameMetadataKey),
		partKey:        msg.Metadata.Get(koto.PartitionKeyMetadataKey),
		orderID:        orderID,
	}
}

// TestTwoServices runs orders and payments side by side: orders publishes
// OrderPlaced, payments consumes it and publishes PaymentProcessed, orders
// consumes that. The correlation ID of the first publish is on every
// message and in every handler's context.
func TestTwoServices(t *testing.T) {
	brokers := kototest.Brokers(t)
	orders, payments := kototest.ServiceName(t, "orders"), kototest.ServiceName(t, "payments")

	ordersEvents, err := cqrs.NewEventPublisher(kototest.NewPublisher(t, broker.Config{Brokers: brokers}), cqrs.EventPublisherConfig{Service: orders})
	if err != nil {
		t.Fatal(err)
	}
	paymentsEvents, err := cqrs.NewEventPublisher(kototest.NewPublisher(t, broker.Config{Brokers: brokers}), cqrs.EventPublisherConfig{Service: payments})
	if err != nil {
		t.Fatal(err)
	}

	atPayments := make(chan seen, 1)
	atOrders := make(chan seen, 1)

	paymentsSvc := newService(t, brokers, cqrs.ServiceConfig{Name: payments, AutoProvisionTopics: true})
	paymentsRouter := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err = paymentsSvc.Register(kototest.Context(t), paymentsRouter,
		cqrs.NewEventConsumer(func(ctx context.Context, ev *OrderPlacedEvent) error {
			atPayments <- observe(ctx, ev.OrderID)
			return paymentsEvents.Publish(ctx, PaymentProcessed{OrderID: ev.OrderID})
		}, cqrs.From(orders)),
	)
	if err != nil {
		t.Fatalf("Register payments: %v", err)
	}

	ordersSvc := newService(t, brokers, cqrs.ServiceConfig{Name: orders, AutoProvisionTopics: true})
	ordersRouter := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err = ordersSvc.Register(kototest.Context(t), ordersRouter,
		cqrs.NewEventConsumer(func(ctx context.Context, ev *PaymentProcessed) error {
			atOrders <- observe(ctx, ev.OrderID)
			return nil
		}, cqrs.From(payments)),
	)
	if err != nil {
		t.Fatalf("Register orders: %v", err)
	}
	kototest.RunRouter(t, paymentsRouter)
	kototest.RunRouter(t, ordersRouter)

	const corrID = "corr-two-services"
	ctx := correlation.WithID(kototest.Context(t), corrID)
	if err := ordersEvents.Publish(ctx, OrderPlacedEvent{OrderID: "o-1", Amount: 42}); err != nil {
		t.Fatalf("Publish: %v", err)
	}

	p := kototest.Receive(t, atPayments, "OrderPlaced at payments")
	o := kototest.Receive(t, atOrders, "PaymentProcessed at orders")

	checks := []struct{ name, got, want string }{
		{"payments topic", p.topic, topics.Event(orders, "order-placed")},
		{"payments group/handler", p.handler, topics.ConsumerGroup(payments, "order-placed")},
		{"payments ctx correlation", p.ctxCorrelation, corrID},
		{"OrderPlaced correlation", p.msgCorrelation, corrID},
		{"OrderPlaced type name", p.name, "order-placed"},
		{"OrderPlaced partition key", p.partKey, "o-1"},
		{"OrderPlaced order", p.orderID, "o-1"},
		{"orders topic", o.topic, topics.Event(payments, "payment-processed")},
		{"orders group/handler", o.handler, topics.ConsumerGroup(orders, "payment-processed")},
		{"orders ctx correlation", o.ctxCorrelation, corrID},
		{"PaymentProcessed correlation", o.msgCorrelation, corrID},
		{"PaymentProcessed type name", o.name, "payment-processed"},
		{"PaymentProcessed partition key", o.partKey, ""},
	}
	if orders == "orders" {
		checks = append(checks,
			struct{ name, got, want string }{"literal topic", p.topic, "orders.order-placed"},
			struct{ name, got, want string }{"literal group", p.handler, "payments.order-placed-consumer"},
		)
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	for _, id := range []string{p.msgUUID, o.msgUUID} {
		if u, err := uuid.Parse(id); err != nil || u.Version() != 7 {
			t.Errorf("message UUID %q is not a UUIDv7 (%v)", id, err)
		}
	}
}

// TestRegisterOnRunningRouter registers a consumer on a router that
// already runs: it starts and handles an event. A closed router is refused.
func TestRegisterOnRunningRouter(t *testing.T) {
	brokers := kototest.Brokers(t)
	orders := kototest.ServiceName(t, "orders")
	events, err := cqrs.NewEventPublisher(kototest.NewPublisher(t, broker.Config{Brokers: brokers}), cqrs.EventPublisherConfig{Service: orders})
	if err != nil {
		t.Fatal(err)
	}
	svc := newService(t, brokers, cqrs.ServiceConfig{Name: kototest.ServiceName(t, "payments"), AutoProvisionTopics: true})
	router := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	stop := kototest.RunRouter(t, router)

	handled := make(chan string, 1)
	consumer := cqrs.NewEventConsumer(func(_ context.Context, ev *OrderPlacedEvent) error {
		handled <- ev.OrderID
		return nil
	}, cqrs.From(orders))
	if err := svc.Register(kototest.Context(t), router, consumer); err != nil {
		t.Fatalf("Register on a running router: %v", err)
	}
	if err := events.Publish(kototest.Context(t), OrderPlacedEvent{OrderID: "o-1"}); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if got := kototest.Receive(t, handled, "the event at the consumer registered late"); got != "o-1" {
		t.Errorf("handled order %q, want o-1", got)
	}

	stop()
	late := cqrs.NewEventConsumer(func(context.Context, *PaymentProcessed) error { return nil }, cqrs.From(orders))
	if err := svc.Register(kototest.Context(t), router, late); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("Register on a closed router: %v, want ErrInvalidConfig", err)
	}
}
