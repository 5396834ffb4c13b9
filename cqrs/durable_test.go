package cqrs_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/topics"
)

// OrderSubmitted is published twice by a retrying producer: its message ID
// is the order's.
type OrderSubmitted struct {
	OrderID string `json:"orderId"`
}

func (e OrderSubmitted) MessageID() string    { return "order-submitted/" + e.OrderID }
func (e OrderSubmitted) PartitionKey() string { return e.OrderID }

// PaymentSettled follows an OrderSubmitted, on the same key.
type PaymentSettled struct {
	OrderID string `json:"orderId"`
}

func (e PaymentSettled) PartitionKey() string { return e.OrderID }

// durableEnv is a DurableOutbox on a schema of the test's own, with a
// table where handlers record their effects.
type durableEnv struct {
	t       *testing.T
	brokers []string
	pool    *pgxpool.Pool
	schema  string
	d       *cqrs.DurableOutbox
}

func newDurableEnv(t *testing.T) *durableEnv {
	t.Helper()
	return newDurableEnvWith(t, 12)
}

// newDurableEnvWith is newDurableEnv on a pool of maxConns connections.
func newDurableEnvWith(t *testing.T, maxConns int32) *durableEnv {
	t.Helper()
	cfg := pgtest.Config(t)
	cfg.MaxConns = maxConns
	pool := pgtest.PoolWith(t, cfg)
	schema := pgtest.Schema(t, pool)
	brokers := kototest.Brokers(t)
	d, err := cqrs.NewDurableOutbox(kototest.Context(t), pool, cqrs.DurableOutboxConfig{
		Broker:    broker.Config{Brokers: brokers},
		Outbox:    outbox.Config{Schema: schema},
		Store:     postgres.Config{Schema: schema, CleanupInterval: -1},
		Forwarder: outbox.ForwarderConfig{PollInterval: 200 * time.Millisecond},
		Logger:    kototest.Logger(slog.LevelError),
	})
	if err != nil {
		t.Fatalf("NewDurableOutbox: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("DurableOutbox.Close: %v", err)
		}
	})
	e := &durableEnv{t: t, brokers: brokers, pool: pool, schema: schema, d: d}
	pgtest.Exec(t, pool, "CREATE TABLE "+schema+".effects (id bigserial PRIMARY KEY, what text NOT NULL)")
	return e
}

// effect records what in the transaction of ctx.
func (e *durableEnv) effect(ctx context.Context, what string) error {
	tx, ok := postgres.TxFromContext(ctx)
	if !ok {
		return koto.Poison(errors.New("no transaction in the handler's context"))
	}
	_, err := tx.Exec(ctx, "INSERT INTO "+e.schema+".effects (what) VALUES ($1)", what)
	return err
}

// effects counts the effect rows of what.
func (e *durableEnv) effects(what string) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(kototest.Context(e.t), "SELECT count(*) FROM "+e.schema+".effects WHERE what = $1", what).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// service is DurableOutbox.Service with the test's logger and fast retries,
// closed when the test ends.
func (e *durableEnv) service(name string) *cqrs.Service {
	e.t.Helper()
	return e.concurrentService(name, 0)
}

// concurrentService is service with Broker.Concurrency concurrency.
func (e *durableEnv) concurrentService(name string, concurrency int) *cqrs.Service {
	e.t.Helper()
	return e.serviceWith(cqrs.ServiceConfig{Name: name, Broker: broker.Config{Concurrency: concurrency}})
}

// serviceWith is service with cfg, its brokers, logger, topic provisioning
// and fast retries set.
func (e *durableEnv) serviceWith(cfg cqrs.ServiceConfig) *cqrs.Service {
	e.t.Helper()
	cfg.AutoProvisionTopics, cfg.Logger, cfg.Broker.Brokers = true, kototest.Logger(slog.LevelError), e.brokers
	cfg.DeadLetter.Backoff = koto.Backoff{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond}
	svc, err := e.d.Service(cfg)
	if err != nil {
		e.t.Fatalf("DurableOutbox.Service: %v", err)
	}
	closeAtEnd(e.t, svc)
	return svc
}

// TestDurableOutboxEvents: orders writes its order and OrderPlaced in one
// transaction; payments, a transactional consumer of the durable outbox,
// writes its effect and PaymentProcessed in the transaction that claims
// the message; the first attempt fails after writing both, and the event
// is delivered twice. Exactly one effect and one PaymentProcessed result,
// with the correlation ID of the order. A rolled-back order publishes
// nothing; a publish outside a transaction is refused, unless it goes
// through an AutoTxPublisher.
func TestDurableOutboxEvents(t *testing.T) {
	e := newDurableEnv(t)
	orders, payments := kototest.ServiceName(t, "orders"), kototest.ServiceName(t, "payments")
	ordersEvents, err := e.d.EventPublisher(cqrs.EventPublisherConfig{Service: orders})
	if err != nil {
		t.Fatal(err)
	}
	paymentsEvents, err := e.d.EventPublisher(cqrs.EventPublisherConfig{Service: payments})
	if err != nil {
		t.Fatal(err)
	}

	var tries kototest.Counter
	paid := make(chan seen, 8)
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err = e.service(payments).Register(kototest.Context(t), r, cqrs.NewEventConsumer(func(ctx context.Context, ev *OrderSubmitted) error {
		if err := e.effect(ctx, "charge "+ev.OrderID); err != nil {
			return err
		}
		if err := paymentsEvents.Publish(ctx, PaymentSettled{OrderID: ev.OrderID}); err != nil {
			return err
		}
		if tries.Add(ev.OrderID) == 1 {
			return errors.New("first attempt fails after writing")
		}
		return nil
	}, cqrs.From(orders), cqrs.LockKeys(func(msg *message.Message) ([]string, error) {
		return []string{msg.Metadata.Get(koto.PartitionKeyMetadataKey)}, nil
	})))
	if err != nil {
		t.Fatalf("Register payments: %v", err)
	}
	err = e.service(orders).Register(kototest.Context(t), r, cqrs.NewEventConsumer(func(ctx context.Context, ev *PaymentSettled) error {
		paid <- observe(ctx, ev.OrderID)
		return nil
	}, cqrs.From(payments)))
	if err != nil {
		t.Fatalf("Register orders: %v", err)
	}
	kototest.RunRouter(t, r)

	ctx := kototest.Context(t)
	if err := ordersEvents.Publish(ctx, OrderSubmitted{OrderID: "o-0"}); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("Publish outside a transaction = %v, want outbox.ErrNoTransaction", err)
	}
	errRollback := errors.New("rolled back")
	err = e.d.Outbox().Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := ordersEvents.Publish(ctx, OrderSubmitted{OrderID: "o-rolled-back"}); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	placed := OrderSubmitted{OrderID: "o-1"}
	for range 2 { // the same message ID twice: a retrying producer
		err := e.d.Outbox().Transact(correlation.WithID(ctx, "checkout-o-1"), func(ctx context.Context, tx pgx.Tx) error {
			if err := e.d.Outbox().LockKeys(ctx, tx, placed.OrderID); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+e.schema+".effects (what) VALUES ('order o-1')"); err != nil {
				return err
			}
			return ordersEvents.Publish(ctx, placed)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	auto, err := cqrs.NewEventPublisher(e.d.Outbox().AutoTxPublisher(), cqrs.EventPublisherConfig{Service: orders})
	if err != nil {
		t.Fatal(err)
	}
	if err := auto.Publish(correlation.WithID(ctx, "checkout-o-2"), OrderSubmitted{OrderID: "o-2"}); err != nil {
		t.Fatalf("Publish outside a transaction through AutoTxPublisher: %v", err)
	}

	got := map[string]seen{}
	for len(got) < 2 {
		s := kototest.Receive(t, paid, "PaymentSettled")
		if _, dup := got[s.orderID]; dup {
			t.Fatalf("PaymentSettled of %s handled twice", s.orderID)
		}
		got[s.orderID] = s
	}
	for id, s := range got {
		if want := "checkout-" + id; s.ctxCorrelation != want || s.partKey != id {
			t.Errorf("PaymentSettled of %s: correlation %q, partition key %q; want %q and %s", id, s.ctxCorrelation, s.partKey, want, id)
		}
	}
	kototest.WaitFor(t, "the outbox to be empty", func() bool {
		var n int
		_ = e.pool.QueryRow(ctx, "SELECT count(*) FROM "+e.d.Outbox().Table()).Scan(&n)
		return n == 0
	})
	select {
	case s := <-paid:
		t.Fatalf("unexpected PaymentSettled of %s", s.orderID)
	case <-time.After(400 * time.Millisecond): // twice the poll interval
	}
	for what, want := range map[string]int{"order o-1": 2, "charge o-1": 1, "charge o-2": 1, "charge o-rolled-back": 0} {
		if n := e.effects(what); n != want {
			t.Errorf("%d effects %q, want %d", n, what, want)
		}
	}
	if n := tries.Get("o-1"); n != 2 {
		t.Errorf("payments handled o-1 %d times, want 2: a failed attempt, then one that committed", n)
	}
}

// TestDurableOutboxCommands: Send writes the command into the outbox in
// the transaction of its context and is refused without one; Request
// publishes directly, inside a transaction or not. An idempotent command
// consumer of the durable outbox's Service answers a request in its
// transaction: a handler error reaches the requester and its write is
// undone, a success commits its write.
func TestDurableOutboxCommands(t *testing.T) {
	e := newDurableEnv(t)
	orders, inventory := kototest.ServiceName(t, "orders"), kototest.ServiceName(t, "inventory")
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	errNoStock := &cqrs.HandlerError{Kind: "out-of-stock", Message: "out of stock"}
	err := e.service(inventory).Register(kototest.Context(t), r, cqrs.NewCommandConsumerWithResult(func(ctx context.Context, cmd *ReserveStock) (StockReservation, error) {
		if err := e.effect(ctx, "reserve "+cmd.SKU); err != nil {
			return StockReservation{}, err
		}
		if cmd.SKU == "none" {
			return StockReservation{}, errNoStock
		}
		return StockReservation{ReservationID: "r-" + cmd.SKU}, nil
	}, cqrs.Idempotent(true)))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	kototest.RunRouter(t, r)
	d, err := e.d.CommandDispatcher(cqrs.CommandDispatcherConfig{
		Service: orders, AutoProvisionTopics: true, Logger: kototest.Logger(slog.LevelError),
		Routes: []cqrs.Route{cqrs.RouteOf[ReserveStock](topics.Command(inventory, "reserve-stock"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ctx := kototest.Context(t)
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}

	if err := d.Send(ctx, ReserveStock{SKU: "outside"}); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("Send outside a transaction = %v, want outbox.ErrNoTransaction", err)
	}
	err = e.d.Outbox().Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
		res, err := cqrs.Request[StockReservation](ctx, d, ReserveStock{SKU: "in-tx"})
		if err != nil || res.ReservationID != "r-in-tx" {
			return errors.Join(errors.New("Request in a transaction"), err)
		}
		return d.Send(ctx, ReserveStock{SKU: "sent"})
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cqrs.Request[StockReservation](ctx, d, ReserveStock{SKU: "none"})
	if !errors.Is(err, errNoStock) {
		t.Fatalf("Request of a failing command = %v, want the handler's error", err)
	}
	kototest.WaitFor(t, "the sent command handled", func() bool { return e.effects("reserve sent") == 1 })
	for what, want := range map[string]int{"reserve in-tx": 1, "reserve none": 0, "reserve outside": 0} {
		if n := e.effects(what); n != want {
			t.Errorf("%d effects %q, want %d", n, what, want)
		}
	}
}

// TestDurableOutboxConfig: the configurations that cannot work fail at
// construction with koto.ErrInvalidConfig, naming the field.
func TestDurableOutboxConfig(t *testing.T) {
	pool := pgtest.LazyPool(t)
	store, err := postgres.NewStore(pool, postgres.Config{CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	brokers := broker.Config{Brokers: []string{"127.0.0.1:1"}}
	ctx := context.Background()
	cases := []struct {
		want string // the start of the error's text
		err  func() error
	}{
		{"invalid configuration: cqrs.NewDurableOutbox got a nil pool; ", func() error {
			_, err := cqrs.NewDurableOutbox(ctx, nil, cqrs.DurableOutboxConfig{Broker: brokers})
			return err
		}},
		{"invalid configuration: cqrs.DurableOutboxConfig.Broker.Brokers is empty; ", func() error {
			_, err := cqrs.NewDurableOutbox(ctx, pool, cqrs.DurableOutboxConfig{})
			return err
		}},
		{"invalid configuration: cqrs.DurableOutboxConfig.Forwarder.Broker is set; ", func() error {
			_, err := cqrs.NewDurableOutbox(ctx, pool, cqrs.DurableOutboxConfig{Broker: brokers, Forwarder: outbox.ForwarderConfig{Broker: brokers}})
			return err
		}},
		{`invalid configuration: cqrs.DurableOutboxConfig.Outbox.Table "bad\x00name" contains a NUL byte; `, func() error {
			_, err := cqrs.NewDurableOutbox(ctx, pool, cqrs.DurableOutboxConfig{Broker: brokers, Outbox: outbox.Config{Table: "bad\x00name"}})
			return err
		}},
		{"invalid configuration: cqrs.DurableOutboxConfig.Forwarder.BatchSize is -1; ", func() error {
			_, err := cqrs.NewDurableOutbox(ctx, pool, cqrs.DurableOutboxConfig{Broker: brokers, Forwarder: outbox.ForwarderConfig{BatchSize: -1}})
			return err
		}},
		// LockKeys orders the outbox rows of a transactional consumer: a
		// Service that is not a DurableOutbox's has none, whatever its store.
		{"invalid configuration: event consumer of order-submitted: LockKeys ", func() error {
			svc, err := cqrs.NewService(cqrs.ServiceConfig{Name: "s", Broker: brokers, Store: store})
			if err != nil {
				return err
			}
			defer svc.Close(ctx)
			return svc.Register(ctx, kototest.NewRouter(t, kototest.Logger(slog.LevelError)), cqrs.NewEventConsumer(func(context.Context, *OrderSubmitted) error { return nil },
				cqrs.From("orders"), cqrs.LockKeys(func(*message.Message) ([]string, error) { return nil, nil })))
		}},
	}
	for _, c := range cases {
		err := c.err()
		if !errors.Is(err, koto.ErrInvalidConfig) || err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("got %v, want koto.ErrInvalidConfig starting %q", err, c.want)
		}
	}
}

// TestDurableOutboxServiceConfig: DurableOutbox.Service refuses a Store of
// the caller's, since its consumers claim in the DurableOutbox's, and
// validates the rest of the configuration as NewService does.
func TestDurableOutboxServiceConfig(t *testing.T) {
	e := newDurableEnv(t)
	mem := idempotency.NewMemoryStore(0)
	defer mem.Close()
	cases := []struct {
		want string
		cfg  cqrs.ServiceConfig
	}{
		{"invalid configuration: cqrs.ServiceConfig.Store is set; ", cqrs.ServiceConfig{Name: "s", Store: mem}},
		{"invalid configuration: cqrs.ServiceConfig.Name is empty; ", cqrs.ServiceConfig{}},
	}
	for _, c := range cases {
		svc, err := e.d.Service(c.cfg)
		if err == nil {
			_ = svc.Close(kototest.Context(t))
		}
		if !errors.Is(err, koto.ErrInvalidConfig) || err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Service(%+v) = %v, want koto.ErrInvalidConfig starting %q", c.cfg, err, c.want)
		}
	}
}

// TestNewDurableOutboxNoKafka: with no broker listening, the constructor
// cleans up what it set up and reports the refused connection.
func TestNewDurableOutboxNoKafka(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	d, err := cqrs.NewDurableOutbox(kototest.Context(t), pool, cqrs.DurableOutboxConfig{
		Broker: broker.Config{Brokers: []string{kototest.ClosedAddr(t)}},
		Outbox: outbox.Config{Schema: schema},
		Store:  postgres.Config{Schema: schema},
	})
	if d != nil {
		t.Error("NewDurableOutbox returned a DurableOutbox with its error")
	}
	kototest.WantRefused(t, "NewDurableOutbox", err)
}
