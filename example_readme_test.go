package koto_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/topics"
)

// The code of README.md: each region between "readme:" comments is a
// snippet of it, which TestREADMESnippets compares, and compiles here with
// the tests. The packages' own examples run.

type OrderPlaced struct{ OrderID string }

type ReserveStock struct{ SKU string }

type StockReserved struct{ ReservationID string }

type PaymentTimedOut struct{ OrderID string }

func refundLatePayment(context.Context) error { return nil }

func gatewayCharge(context.Context, string) (time.Duration, error) { return 0, nil }

func handleOrderPlaced(*message.Message) error { return nil }

func charge(context.Context, string) error { return nil }

// readme: consumer
// consume runs payments' consumer of orders' OrderPlaced until ctx ends.
func consume(ctx context.Context, pool *pgxpool.Pool, brokers []string, logger *slog.Logger) error {
	store, err := postgres.NewStore(pool, postgres.Config{}) // koto.processed_messages, created on first use
	if err != nil {
		return err
	}
	defer store.Close()
	pub, err := broker.NewPublisher(broker.Config{Brokers: brokers, Logger: logger}) // sends the dead letters
	if err != nil {
		return err
	}
	defer pub.Close()
	group := topics.ConsumerGroup("payments", "order-placed") // payments.order-placed-consumer
	sub, err := broker.NewSubscriber(broker.Config{Brokers: brokers, ConsumerGroup: group, Logger: logger})
	if err != nil {
		return err
	}
	chain, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: store, Logger: logger})
	if err != nil {
		return err
	}
	defer chain.Close(context.Background()) // after the router, before the store
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NewSlogLogger(logger))
	if err != nil {
		return err
	}
	// The handler's name is the consumer group: it names the dead-letter topic.
	h := router.AddConsumerHandler(group, topics.Event("orders", "order-placed"), sub, handleOrderPlaced)
	h.AddMiddleware(chain.Middlewares()...)
	return router.Run(ctx)
}

// readme: end

// readme: transactional
// transactionalChain is the chain of handlers that write in the
// transaction that claims their message.
func transactionalChain(pub message.Publisher, store *postgres.Store, logger *slog.Logger) (*middleware.Chain, error) {
	return middleware.Defaults(middleware.Config{
		Publisher: pub, Store: store, Logger: logger,
		Idempotency: middleware.IdempotencyConfig{Transactional: true},
	})
}

// handlePayment writes the payment in that transaction: nil commits it
// with the claim, an error rolls both back.
func handlePayment(msg *message.Message) error {
	tx, _ := postgres.TxFromContext(msg.Context()) // the one accessor of the transaction
	_, err := tx.Exec(msg.Context(), "INSERT INTO payments (order_id) VALUES ($1)", string(msg.Payload))
	return err
}

// readme: end

// readme: cqrs
// payments charges each OrderPlaced once; a message that does not decode
// goes to payments.order-placed-consumer.dlq.
func payments(ctx context.Context, router *message.Router, store *postgres.Store, cfg broker.Config) (*cqrs.Service, error) {
	svc, err := cqrs.NewService(cqrs.ServiceConfig{Name: "payments", Broker: cfg, Store: store})
	if err != nil {
		return nil, err
	}
	return svc, svc.Register(ctx, router, cqrs.NewEventConsumer(func(ctx context.Context, ev *OrderPlaced) error {
		return charge(ctx, ev.OrderID)
	}, cqrs.From("orders")))
}

// checkout publishes OrderPlaced on orders.order-placed and asks inventory
// for stock, waiting for the answer (10 s at most by default); commands
// was started once, which subscribes to orders.replies.
func checkout(ctx context.Context, events *cqrs.EventPublisher, commands *cqrs.CommandDispatcher) error {
	res, err := cqrs.Request[StockReserved](ctx, commands, ReserveStock{SKU: "sku-1"})
	var handlerErr *cqrs.HandlerError
	switch {
	case errors.Is(err, cqrs.ErrTimeout): // not sent, or no reply in time: the text says which
		return err
	case errors.As(err, &handlerErr): // the handler's error, with its Kind
		return fmt.Errorf("no stock: %w", err)
	case err != nil:
		return err
	}
	return events.Publish(ctx, OrderPlaced{OrderID: res.ReservationID})
}

// readme: end

// readme: batches
// accounting loads every OrderPlaced into its sales table, many per
// transaction: the transaction claims its events, so each is loaded once.
func accounting(ctx context.Context, router *message.Router, durable *cqrs.DurableOutbox, cfg broker.Config) (*cqrs.Service, error) {
	svc, err := durable.Service(cqrs.ServiceConfig{Name: "accounting", Broker: cfg})
	if err != nil {
		return nil, err
	}
	return svc, svc.Register(ctx, router, cqrs.NewBatchEventConsumer(func(ctx context.Context, batch []cqrs.BatchItem[OrderPlaced]) error {
		tx, _ := postgres.TxFromContext(ctx) // the batch's transaction
		rows := make([][]any, len(batch))
		for i, it := range batch {
			rows[i] = []any{it.Event.OrderID}
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"sales"}, []string{"order_id"}, pgx.CopyFromRows(rows))
		return err
	}, cqrs.From("orders"), cqrs.WithBatch(broker.BatchConfig{MaxMessages: 500})))
}

// readme: end

// readme: dispatcher
func newCommands(ctx context.Context, pub message.Publisher, cfg broker.Config) (*cqrs.CommandDispatcher, error) {
	commands, err := cqrs.NewCommandDispatcher(pub, cqrs.CommandDispatcherConfig{
		Service: "orders", Broker: cfg,
		Routes: []cqrs.Route{cqrs.RouteOf[ReserveStock]("inventory.reserve-stock")},
	})
	if err != nil {
		return nil, err
	}
	return commands, commands.Start(ctx)
}

// readme: end

// readme: outbox
// placeOrder writes the order and its OrderPlaced in one transaction: the
// event reaches Kafka once the commit succeeded, never for a rollback.
func placeOrder(ctx context.Context, durable *cqrs.DurableOutbox, events *cqrs.EventPublisher, id string) error {
	return durable.Outbox().Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id); err != nil {
			return err
		}
		return events.Publish(ctx, OrderPlaced{OrderID: id})
	})
}

// newOutbox sets up the outbox of pool's database (koto.outbox,
// koto.processed_messages) and its forwarder; close it after the router
// and the services, before the pool.
func newOutbox(ctx context.Context, pool *pgxpool.Pool, cfg broker.Config) (*cqrs.DurableOutbox, *cqrs.EventPublisher, error) {
	durable, err := cqrs.NewDurableOutbox(ctx, pool, cqrs.DurableOutboxConfig{Broker: cfg})
	if err != nil {
		return nil, nil, err
	}
	events, err := durable.EventPublisher(cqrs.EventPublisherConfig{Service: "orders"})
	if err != nil {
		return nil, nil, errors.Join(err, durable.Close())
	}
	return durable, events, nil
}

// readme: end

// readme: schedule
// placeOrderWithTimeout writes the order and schedules its payment
// timeout in one transaction; the order keeps the schedule's ID.
func placeOrderWithTimeout(ctx context.Context, durable *cqrs.DurableOutbox, events *cqrs.EventPublisher, id string) error {
	return durable.Outbox().Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
		timeout, err := events.PublishAfter(ctx, 15*time.Minute, PaymentTimedOut{OrderID: id})
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "INSERT INTO orders (id, payment_timeout) VALUES ($1, $2)", id, timeout)
		return err
	})
}

// paymentArrived runs in the transaction of the consumer that records the
// payment: the timeout is cancelled with it, or has fired already.
func paymentArrived(ctx context.Context, events *cqrs.EventPublisher, timeout string) error {
	err := events.Cancel(ctx, timeout)
	if errors.Is(err, outbox.ErrSent) {
		return refundLatePayment(ctx)
	}
	return err
}

// readme: end

// readme: parking
// paymentsService parks what keeps failing: three attempts in place,
// then later ones a minute, 5, 30 and 120 minutes on, with the message's
// slot free and its key's later messages waiting behind it, in order; then
// the dead letter.
func paymentsService(durable *cqrs.DurableOutbox, cfg broker.Config) (*cqrs.Service, error) {
	return durable.Service(cqrs.ServiceConfig{
		Name:   "payments",
		Broker: cfg,
		DeadLetter: middleware.DeadLetterConfig{
			MaxAttempts: 3,
			Parking:     middleware.ParkingConfig{Delays: []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour}},
		},
	})
}

// chargeCard parks the message for as long as the gateway asks.
func chargeCard(ctx context.Context, orderID string) error {
	retryIn, err := gatewayCharge(ctx, orderID)
	if err != nil && retryIn > 0 {
		return koto.RetryAfter(err, retryIn)
	}
	return err
}

// readme: end

// readme: metrics
// serveMetrics exports every metric on /metrics in Prometheus's format, and
// propagates the W3C trace context through the messages.
func serveMetrics(addr string) error {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return err
	}
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter)))
	otel.SetTextMapPropagator(propagation.TraceContext{})
	http.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	return http.ListenAndServe(addr, nil)
}

// readme: end

// readme: testing
// testPayments tests payments (above) on a broker, a schema and a router
// of its own: it publishes an order and waits until the order, and all it
// caused, is handled; then it calls the consumer's logic alone.
func testPayments(t *testing.T) {
	h := kototest.New(t)
	store, err := postgres.NewStore(h.Pool(), postgres.Config{Schema: h.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	h.Defer(func() { _ = store.Close() })
	svc, err := payments(h.Context(), h.Router(), store, h.Broker())
	if err != nil {
		t.Fatal(err)
	}
	h.Defer(func() { _ = svc.Close(context.Background()) })
	pub, err := broker.NewPublisher(h.Broker())
	if err != nil {
		t.Fatal(err)
	}
	h.Defer(func() { _ = pub.Close() })
	h.Run()

	events, _ := cqrs.NewEventPublisher(pub, cqrs.EventPublisherConfig{Service: "orders"})
	if err := events.Publish(h.Context(), OrderPlaced{OrderID: "o-1"}); err != nil {
		t.Fatal(err)
	}
	h.Wait()
	if got := kototest.Consumed[OrderPlaced](h, kototest.Handled); len(got) != 1 {
		t.Errorf("handled %v, want o-1's once", got)
	}
	h.NoDeadLetters()

	charge := cqrs.NewEventConsumer(func(ctx context.Context, ev *OrderPlaced) error {
		return chargeCard(ctx, ev.OrderID)
	}, cqrs.From("orders"))
	if err := kototest.Invoke(t, charge, OrderPlaced{OrderID: "o-2"}, kototest.WithCorrelationID("c-2")); err != nil {
		t.Fatal(err)
	}
}

// readme: end

// The README's functions are called by no test: they show how to call.
var _ = []any{consume, transactionalChain, handlePayment, payments, checkout, newCommands, placeOrder, newOutbox, accounting, placeOrderWithTimeout, paymentArrived, paymentsService, chargeCard, serveMetrics, testPayments}
