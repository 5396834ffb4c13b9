package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/dlqmeta"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/parking"
	"github.com/koto-dev/watermill-koto/telemetry"
	"github.com/koto-dev/watermill-koto/topics"
)

// shop holds the three services and what they share.
type shop struct {
	out       io.Writer // where it says what it did
	brokers   []string
	log       *slog.Logger
	pub       *broker.Publisher // direct to Kafka: the malformed message
	durable   *cqrs.DurableOutbox
	ledger    ledger
	router    *message.Router
	services  []*cqrs.Service
	orders    *cqrs.EventPublisher // writes into the outbox
	commands  *cqrs.CommandDispatcher
	gateway   cardGateway
	paid      chan string
	malformed string // the UUID of the OrderPlaced that does not decode
	stop      context.CancelFunc
	stopped   chan struct{}
	closed    bool

	tel    *telemetry.Telemetry // nil: OpenTelemetry's global providers
	tracer trace.Tracer         // starts the checkout span of each order
	traced trace.TraceID        // the first order's trace
}

func newShop(ctx context.Context, brokers []string, pool *pgxpool.Pool, opts options, obs *observability) (_ *shop, err error) {
	if obs == nil { // a test's: no metrics or traces of its own
		obs = &observability{tracer: otel.Tracer("shop")}
	}
	log := opts.log
	s := &shop{out: opts.stdout(), brokers: brokers, log: log, ledger: ledger{pool: pool, schema: opts.schema},
		paid: make(chan string, 64), stopped: make(chan struct{}), tel: obs.tel, tracer: obs.tracer}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.pub, err = broker.NewPublisher(broker.Config{Brokers: brokers}); err != nil {
		return nil, err
	}
	// One durable outbox for the database that orders and payments share:
	// the outbox table and its forwarder, payments' processed messages,
	// which survive restarts, and the parked messages.
	s.durable, err = cqrs.NewDurableOutbox(ctx, pool, cqrs.DurableOutboxConfig{
		Broker:  broker.Config{Brokers: brokers},
		Outbox:  outbox.Config{Schema: opts.schema},
		Store:   postgres.Config{Schema: opts.schema},
		Parking: parking.Config{Schema: opts.schema},
		// The forwarder reports the outbox's backlog, rows waiting and
		// lag, with the services' metrics.
		Forwarder: outbox.ForwarderConfig{Telemetry: s.tel},
		Logger:    log,
	})
	if err != nil {
		return nil, err
	}
	if err = s.ledger.create(ctx); err != nil {
		return nil, err
	}
	if s.orders, err = s.durable.EventPublisher(cqrs.EventPublisherConfig{Service: "orders", Telemetry: s.tel}); err != nil {
		return nil, err
	}
	s.router = opts.router
	if s.router == nil {
		if s.router, err = message.NewRouter(message.RouterConfig{}, watermill.NewSlogLogger(log)); err != nil {
			return nil, err
		}
	}
	if err = s.register(ctx); err != nil {
		return nil, err
	}
	if opts.router == nil {
		s.run()
	}
	s.commands, err = s.durable.CommandDispatcher(cqrs.CommandDispatcherConfig{
		Service:             "orders",
		Routes:              []cqrs.Route{cqrs.RouteOf[ReserveStock]("inventory.reserve-stock")},
		AutoProvisionTopics: true,
		Logger:              log,
		Telemetry:           s.tel,
	})
	if err != nil {
		return nil, err
	}
	return s, s.commands.Start(ctx)
}

// register adds the consumers of inventory, payments and orders to the
// router. payments runs in the transactional mode of the durable outbox:
// its ledger row, its claim of the message and its PaymentProcessed commit
// together.
func (s *shop) register(ctx context.Context) error {
	events, err := s.durable.EventPublisher(cqrs.EventPublisherConfig{Service: "payments", Telemetry: s.tel})
	if err != nil {
		return err
	}
	for _, svc := range []struct {
		name      string
		durable   bool
		consumers []cqrs.Consumer
	}{
		{"inventory", false, []cqrs.Consumer{inventory(s.log)}},
		{"payments", true, []cqrs.Consumer{payments(s.log, s.ledger, events, &s.gateway)}},
		{"orders", true, []cqrs.Consumer{paid(s.log, s.ledger, s.orders, s.paid), timedOut(s.log, s.ledger)}},
	} {
		cfg := cqrs.ServiceConfig{
			Name:                svc.name,
			Broker:              broker.Config{Brokers: s.brokers},
			AutoProvisionTopics: true,
			DeadLetter:          middleware.DeadLetterConfig{MaxAttempts: 3},
			Logger:              s.log,
			Telemetry:           s.tel,
		}
		var service *cqrs.Service
		if svc.durable {
			// Three attempts in place, then later ones, in the durable
			// outbox's parking table: a charge the card gateway cannot
			// take now is parked, its partition moving on, and comes
			// back in a minute, then in 5, then in 30, before its dead
			// letter. koto.RetryAfter parks it at once, for as long as
			// it asks.
			cfg.DeadLetter.Parking.Delays = []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute}
			service, err = s.durable.Service(cfg)
		} else {
			cfg.Publisher = s.pub
			service, err = cqrs.NewService(cfg)
		}
		if err != nil {
			return err
		}
		s.services = append(s.services, service)
		if err := service.Register(ctx, s.router, svc.consumers...); err != nil {
			return fmt.Errorf("register %s: %w", svc.name, err)
		}
	}
	return nil
}

// run starts the router and waits until its handlers run.
func (s *shop) run() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go func() {
		defer close(s.stopped)
		if err := s.router.Run(ctx); err != nil {
			s.log.Error("router stopped", "error", err)
		}
	}()
	<-s.router.Running()
}

// Close stops everything newShop started, in reverse order. Calling it
// twice is fine.
func (s *shop) Close() {
	if s.closed {
		return
	}
	s.closed = true
	if s.commands != nil {
		_ = s.commands.Close()
	}
	if s.stop != nil {
		s.stop()
		<-s.stopped
	}
	for _, svc := range s.services {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = svc.Close(ctx)
		cancel()
	}
	if s.durable != nil {
		_ = s.durable.Close()
	}
	if s.pub != nil {
		_ = s.pub.Close()
	}
}

// finish stops the services, so that every span has ended, and prints
// the first order's trace when asked to.
func (s *shop) finish(ctx context.Context, obs *observability) error {
	s.Close()
	return obs.printTrace(ctx, s.traced)
}

// demo places the orders, each twice, asks for stock that does not exist
// and sends a malformed event, then reports what happened.
func (s *shop) demo(ctx context.Context, orders int) error {
	run := correlation.NewID()[24:] // order IDs unique to this run
	if err := s.checkout(ctx, run, orders); err != nil {
		return err
	}
	return s.report(ctx, run, orders)
}

// checkout places the orders of run, each twice, asks for stock that
// does not exist, and sends an OrderPlaced that does not decode.
func (s *shop) checkout(ctx context.Context, run string, orders int) error {
	for i := 1; i <= orders; i++ {
		if err := s.placeOrder(ctx, fmt.Sprintf("o-%s-%d", run, i), i); err != nil {
			return err
		}
	}
	_, err := cqrs.Request[StockReserved](ctx, s.commands, ReserveStock{SKU: "unobtainium", Quantity: 1})
	var he *cqrs.HandlerError
	if !errors.As(err, &he) {
		return fmt.Errorf("want an out-of-stock error, got %v", err)
	}
	fmt.Fprintf(s.out, "reserve unobtainium: failed with kind %q: %s\n", he.Kind, he.Message)
	return s.sendMalformed()
}

// report says what became of checkout's messages: each payment as it
// arrives, the malformed event's dead letter, and the summary.
func (s *shop) report(ctx context.Context, run string, orders int) error {
	for range orders {
		select {
		case line := <-s.paid:
			fmt.Fprintln(s.out, line)
		case <-time.After(30 * time.Second):
			return errors.New("timed out waiting for payments")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := s.readDeadLetter(ctx); err != nil {
		return err
	}
	return s.summary(ctx, run, orders)
}

// summary reports the ledger of this run's orders and what went through
// the outbox: each order's OrderPlaced twice and its PaymentProcessed once.
func (s *shop) summary(ctx context.Context, run string, orders int) error {
	charges, err := s.ledger.charges(ctx, "o-"+run+"-%")
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "%d orders, each placed twice: payments charged %d times\n", orders, charges)
	if charges != orders {
		return fmt.Errorf("payments charged %d times for %d orders", charges, orders)
	}
	states, err := s.ledger.states(ctx, "o-"+run+"-%")
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "%d payment timeouts scheduled at checkout, %d cancelled by their payment\n", orders, states["paid"])
	if err := s.parked(ctx, orders); err != nil {
		return err
	}
	if states["paid"] != orders {
		return fmt.Errorf("orders by state %v, want all %d paid", states, orders)
	}
	// Every event was written into the outbox; wait until the forwarder has
	// sent them all on to Kafka.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := s.durable.Outbox().Status(ctx)
		if err != nil {
			return err
		}
		if st.Waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d events still wait in the outbox", st.Waiting)
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Fprintf(s.out, "%d events went through the outbox (%d OrderPlaced, %d PaymentProcessed)\n", 3*orders, 2*orders, orders)
	return nil
}

// paymentTimeout is how long an order waits for its payment before it
// expires; a real shop would wait longer, 15 minutes say.
const paymentTimeout = 30 * time.Second

// placeOrder reserves stock, then writes the order and its OrderPlaced in
// one transaction, twice, as a client that retries after a timeout would:
// the order row is written once, the event (with the same message ID)
// twice, and payments charges once. The transaction that writes the order
// also schedules its PaymentTimedOut, which the payment cancels.
// It runs in the checkout span that makes the order's messages one trace.
func (s *shop) placeOrder(ctx context.Context, orderID string, n int) error {
	ctx = correlation.WithID(ctx, "checkout-"+orderID)
	ctx, span := s.tracer.Start(ctx, "checkout", trace.WithAttributes(attribute.String("shop.order_id", orderID)))
	defer span.End()
	if n == 1 {
		s.traced = span.SpanContext().TraceID()
	}
	res, err := cqrs.Request[StockReserved](ctx, s.commands, ReserveStock{SKU: fmt.Sprintf("sku-%d", n), Quantity: 1})
	if err != nil {
		return fmt.Errorf("reserve stock for %s: %w", orderID, err)
	}
	fmt.Fprintf(s.out, "order %s: stock reserved (%s)\n", orderID, res.ReservationID)
	ev := OrderPlaced{OrderID: orderID, SKU: fmt.Sprintf("sku-%d", n), Total: 100 * n}
	for range 2 {
		err := s.durable.Outbox().Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
			// The order's key before the first write: its events reach
			// Kafka in the order their transactions commit.
			if err := s.durable.Outbox().LockKeys(ctx, tx, orderID); err != nil {
				return err
			}
			placed, err := s.ledger.placeOrder(ctx, tx, ev)
			if err != nil {
				return err
			}
			if placed {
				timeout, err := s.orders.PublishAfter(ctx, paymentTimeout, PaymentTimedOut{OrderID: orderID})
				if err != nil {
					return err
				}
				if err := s.ledger.setTimeout(ctx, tx, orderID, timeout); err != nil {
					return err
				}
			}
			return s.orders.Publish(ctx, ev)
		})
		if err != nil {
			return fmt.Errorf("place order %s: %w", orderID, err)
		}
	}
	return nil
}

// sendMalformed publishes an OrderPlaced that does not decode, straight
// to Kafka, and keeps its UUID.
func (s *shop) sendMalformed() error {
	topic := topics.Event("orders", topics.TypeName(OrderPlaced{}))
	bad := message.NewMessage(watermill.NewUUID(), []byte(`{"orderId": 42`))
	s.malformed = bad.UUID
	return s.pub.Publish(topic, bad)
}

// readDeadLetter reads the malformed OrderPlaced back from the payments
// consumer's dead-letter topic.
func (s *shop) readDeadLetter(ctx context.Context) error {
	dlq := topics.DeadLetter(topics.ConsumerGroup("payments", topics.TypeName(OrderPlaced{})))
	sub, err := broker.NewSubscriber(broker.Config{Brokers: s.brokers, ConsumerGroup: "shop-example-dlq-reader"})
	if err != nil {
		return err
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	msgs, err := sub.Subscribe(ctx, dlq)
	if err != nil {
		return err
	}
	for msg := range msgs {
		msg.Ack()
		if msg.UUID == s.malformed {
			fmt.Fprintf(s.out, "dead letter on %s: %s\n", dlq, msg.Metadata.Get(dlqmeta.Reason))
			return nil
		}
	}
	return fmt.Errorf("the malformed message did not reach %s: %w", dlq, ctx.Err())
}

// parked reports the charges the card gateway was too busy for: parked,
// then charged when they came back, so that nothing stays parked.
func (s *shop) parked(ctx context.Context, orders int) error {
	busy := s.gateway.busy.Load()
	fmt.Fprintf(s.out, "%d charge(s) the card gateway was too busy for: parked for %v, charged when they came back\n", busy, gatewayBusyFor)
	if orders >= 2 && busy != 1 {
		return fmt.Errorf("the card gateway was too busy %d times, want once", busy)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := s.durable.Parking().Status(ctx)
		switch {
		case err != nil:
			return err
		case len(st) == 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("messages still parked: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
