package cqrs_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
)

// OrderPlaced is an integration event of the orders service.
type OrderPlaced struct {
	OrderID string `json:"orderId"`
	Total   int    `json:"total"`
}

// PartitionKey keeps the events of one order on one partition, in order.
func (e OrderPlaced) PartitionKey() string { return e.OrderID }

// ReserveStock is a command that the inventory service handles.
type ReserveStock struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// StockReservation is ReserveStock's result.
type StockReservation struct {
	ReservationID string `json:"reservationId"`
}

// ErrOutOfStock is a handler error kind that requesters can test for.
var ErrOutOfStock = &cqrs.HandlerError{Kind: "out-of-stock", Message: "out of stock"}

func check(err error) {
	if err != nil {
		panic(err)
	}
}

// runRouterUntil runs r until ctx ends and returns once its handlers run.
func runRouterUntil(ctx context.Context, r *message.Router) {
	go func() { _ = r.Run(ctx) }()
	<-r.Running()
}

func ExampleEventPublisher_Publish() {
	ctx := context.Background()
	kafka, err := embedded.Start(ctx)
	check(err)
	defer kafka.Close()

	pub, err := broker.NewPublisher(broker.Config{Brokers: kafka.Addrs()})
	check(err)
	defer pub.Close()
	events, err := cqrs.NewEventPublisher(pub, cqrs.EventPublisherConfig{Service: "orders"})
	check(err)

	ctx = correlation.WithID(ctx, "checkout-42")
	check(events.Publish(ctx, OrderPlaced{OrderID: "o-1", Total: 990}))

	// Read the record back to show what was published.
	sub, err := broker.NewSubscriber(broker.Config{Brokers: kafka.Addrs(), ConsumerGroup: "example"})
	check(err)
	defer sub.Close()
	msgs, err := sub.Subscribe(ctx, "orders.order-placed")
	check(err)
	msg := <-msgs
	msg.Ack()
	fmt.Println(string(msg.Payload))
	fmt.Println("type:", msg.Metadata.Get(koto.TypeNameMetadataKey))
	fmt.Println("partition key:", msg.Metadata.Get(koto.PartitionKeyMetadataKey))
	fmt.Println("correlation:", correlation.FromMessage(msg))
	// Output:
	// {"orderId":"o-1","total":990}
	// type: order-placed
	// partition key: o-1
	// correlation: checkout-42
}

func ExampleNewEventConsumer() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kafka, err := embedded.Start(ctx)
	check(err)
	defer kafka.Close()
	brokers := kafka.Addrs()

	// The payments service consumes the orders service's OrderPlaced events
	// on "orders.order-placed" in the group "payments.order-placed-consumer".
	svc, err := cqrs.NewService(cqrs.ServiceConfig{
		Name:                "payments",
		Broker:              broker.Config{Brokers: brokers},
		AutoProvisionTopics: true,
	})
	check(err)
	defer svc.Close(ctx)
	handled := make(chan string)
	router, err := message.NewRouter(message.RouterConfig{}, nil)
	check(err)
	check(svc.Register(ctx, router, cqrs.NewEventConsumer(func(ctx context.Context, ev *OrderPlaced) error {
		handled <- fmt.Sprintf("charging %d for %s (correlation %s, handler %s)",
			ev.Total, ev.OrderID, correlation.FromContext(ctx), message.HandlerNameFromCtx(ctx))
		return nil
	}, cqrs.From("orders"))))
	runRouterUntil(ctx, router)
	defer router.Close()

	pub, err := broker.NewPublisher(broker.Config{Brokers: brokers})
	check(err)
	defer pub.Close()
	events, err := cqrs.NewEventPublisher(pub, cqrs.EventPublisherConfig{Service: "orders"})
	check(err)
	check(events.Publish(correlation.WithID(ctx, "checkout-7"), OrderPlaced{OrderID: "o-7", Total: 1250}))

	fmt.Println(<-handled)
	// Output:
	// charging 1250 for o-7 (correlation checkout-7, handler payments.order-placed-consumer)
}

func ExampleRequest() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kafka, err := embedded.Start(ctx)
	check(err)
	defer kafka.Close()
	brokers := kafka.Addrs()
	pub, err := broker.NewPublisher(broker.Config{Brokers: brokers})
	check(err)
	defer pub.Close()

	// The inventory service handles ReserveStock on
	// "inventory.reserve-stock" and replies with a StockReservation.
	svc, err := cqrs.NewService(cqrs.ServiceConfig{
		Name:                "inventory",
		Broker:              broker.Config{Brokers: brokers},
		Publisher:           pub,
		AutoProvisionTopics: true,
	})
	check(err)
	defer svc.Close(ctx)
	router, err := message.NewRouter(message.RouterConfig{}, nil)
	check(err)
	check(svc.Register(ctx, router, cqrs.NewCommandConsumerWithResult(
		func(ctx context.Context, cmd *ReserveStock) (StockReservation, error) {
			if cmd.Quantity > 10 {
				return StockReservation{}, fmt.Errorf("%d of %s: %w", cmd.Quantity, cmd.SKU, ErrOutOfStock)
			}
			return StockReservation{ReservationID: "r-" + cmd.SKU}, nil
		})))
	runRouterUntil(ctx, router)
	defer router.Close()

	// The orders service sends it requests and reads replies on
	// "orders.replies".
	commands, err := cqrs.NewCommandDispatcher(pub, cqrs.CommandDispatcherConfig{
		Service:             "orders",
		Routes:              []cqrs.Route{cqrs.RouteOf[ReserveStock]("inventory.reserve-stock")},
		Timeout:             5 * time.Second,
		Broker:              broker.Config{Brokers: brokers},
		AutoProvisionTopics: true,
	})
	check(err)
	check(commands.Start(ctx))
	defer commands.Close()

	res, err := cqrs.Request[StockReservation](ctx, commands, ReserveStock{SKU: "sku-1", Quantity: 2})
	check(err)
	fmt.Println("reserved:", res.ReservationID)

	_, err = cqrs.Request[StockReservation](ctx, commands, ReserveStock{SKU: "sku-2", Quantity: 99})
	var he *cqrs.HandlerError
	if errors.As(err, &he) {
		fmt.Printf("failed: kind %s, message %q, out of stock: %v\n", he.Kind, he.Message, errors.Is(err, ErrOutOfStock))
	}
	// Output:
	// reserved: r-sku-1
	// failed: kind out-of-stock, message "99 of sku-2: out of stock", out of stock: true
}

func ExampleCommandDispatcher_Send() {
	ctx := context.Background()
	kafka, err := embedded.Start(ctx)
	check(err)
	defer kafka.Close()
	pub, err := broker.NewPublisher(broker.Config{Brokers: kafka.Addrs()})
	check(err)
	defer pub.Close()

	commands, err := cqrs.NewCommandDispatcher(pub, cqrs.CommandDispatcherConfig{
		Service: "orders",
		Routes:  []cqrs.Route{cqrs.RouteOf[ReserveStock]("inventory.reserve-stock")},
		Broker:  broker.Config{Brokers: kafka.Addrs()},
	})
	check(err)
	defer commands.Close()

	// Send needs no Start: it only publishes.
	check(commands.Send(ctx, ReserveStock{SKU: "sku-3", Quantity: 1}))
	err = commands.Send(ctx, OrderPlaced{OrderID: "o-1"})
	fmt.Println(errors.Is(err, cqrs.ErrNoRoute))
	// Output:
	// true
}
