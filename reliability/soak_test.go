package reliability

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/topics"
)

// soakWorkers is how many clients place orders at once in TestSoak.
const soakWorkers = 4

// mebibyte is a mebibyte.
const mebibyte = 1 << 20

// soakSlack is what the heap in use may grow beyond a quarter of its size after
// warm-up: the working set of messages in flight, buffers sized by load,
// the in-memory store of the orders service's consumer.
const soakSlack = 4 * mebibyte

// orderPlaced is the orders service's event in TestSoak. Its message ID
// follows the order, so placing an order twice is a duplicate. Its lines
// give it the size of a real order, about 1 KiB, so that a leak of
// messages shows in the heap as it would in production.
type orderPlaced struct {
	OrderID string   `json:"orderId"`
	Total   int      `json:"total"`
	Lines   []string `json:"lines"`
}

// orderLines are the lines of every order in TestSoak.
var orderLines = func() []string {
	lines := make([]string, 16)
	for i := range lines {
		lines[i] = fmt.Sprintf("%02d x sku-%04d %-48s", i+1, i*37, "a product with a description")
	}
	return lines
}()

func (e orderPlaced) MessageID() string    { return "order-placed/" + e.OrderID }
func (e orderPlaced) PartitionKey() string { return e.OrderID }

// paymentProcessed is the payments service's event in TestSoak.
type paymentProcessed struct {
	OrderID string `json:"orderId"`
	Amount  int    `json:"amount"`
}

func (e paymentProcessed) PartitionKey() string { return e.OrderID }

// TestSoak runs the example shop's three services (examples/shop) for 60 s
// (by default: 10 s): clients reserve stock from inventory by request/reply,
// then write each order and its orderPlaced twice through the durable
// outbox; payments charges each order in the transactional mode and
// publishes paymentProcessed through the outbox; orders consumes it. After
// a warm-up of a fifth of the run, the heap in use (after a GC) must not
// grow by more than a quarter plus soakSlack by the end, and every order
// must be charged and paid exactly once. The table counts orders as its
// messages.
func TestSoak(t *testing.T) {
	run := time.Duration(fullOrShort(60, 10)) * time.Second
	s := newSoakShop(t)

	var placed atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	warm := time.Now().Add(run / 5)
	var wg sync.WaitGroup
	errs := make(chan error, soakWorkers)
	for w := range soakWorkers {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				if err := s.order(fmt.Sprintf("o-%d-%d", w, i), i+1); err != nil {
					errs <- err
					return
				}
				placed.Add(1)
			}
		})
	}
	time.Sleep(time.Until(warm))
	start, startG := heapInUse(), runtime.NumGoroutine()
	startOrders := placed.Load()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	end, endG := heapInUse(), runtime.NumGoroutine()
	s.settle(t)

	orders := int(placed.Load())
	charges := int(pgtest.QueryInt(t, s.pool, "SELECT count(*) FROM "+s.table("payments_ledger")))
	rows := int(pgtest.QueryInt(t, s.pool, "SELECT count(*) FROM "+s.table("orders")))
	dead := kototest.Records(t, s.brokers, topics.DeadLetter(topics.ConsumerGroup(s.payments, topics.TypeName(orderPlaced{}))))
	record(t, row{
		Checks:     "heap in use after warm-up flat; each order charged and paid once",
		Faults:     "each order placed twice",
		Messages:   orders,
		Duplicates: max(charges-orders, 0) + max(s.paid.Total()-s.paid.Distinct(), 0),
		Losses:     max(orders-charges, 0) + max(orders-s.paid.Distinct(), 0),
		Note: fmt.Sprintf("%v run; heap in use %.1f MiB after warm-up, %.1f MiB at the end (bound %.1f); goroutines %d → %d; %d orders after warm-up",
			run, float64(start)/mebibyte, float64(end)/mebibyte, float64(heapBound(start))/mebibyte, startG, endG, int64(orders)-startOrders),
	})
	if charges != orders || rows != orders || s.paid.Distinct() != orders || s.paid.Total() != orders {
		t.Errorf("%d orders placed twice each: %d order rows, %d charges, %d paid of %d payments seen; want one of each per order",
			orders, rows, charges, s.paid.Distinct(), s.paid.Total())
	}
	if dead != 0 {
		t.Errorf("%d dead letters, want none", dead)
	}
	if end > heapBound(start) {
		t.Errorf("heap in use grew from %.1f MiB after warm-up to %.1f MiB after %v, over the bound of %.1f MiB: a leak",
			float64(start)/mebibyte, float64(end)/mebibyte, run, float64(heapBound(start))/mebibyte)
	}
}

// heapBound is the most the heap in use may reach at the end of TestSoak.
func heapBound(start uint64) uint64 { return start*5/4 + soakSlack }

// heapInUse returns runtime.MemStats.HeapInuse after a garbage collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// soakShop is examples/shop's services, built the same way on the test's
// broker and database: inventory answers reserveStock, payments charges each
// orderPlaced in the transactional mode of the durable outbox, orders
// counts each paymentProcessed.
type soakShop struct {
	brokers   []string
	pool      *pgxpool.Pool
	schema    string
	payments  string // the payments service's name
	ordersSvc string // the orders service's name
	durable   *cqrs.DurableOutbox
	orders    *cqrs.EventPublisher
	commands  *cqrs.CommandDispatcher
	paid      kototest.Counter // paymentProcessed by order ID
}

func newSoakShop(t *testing.T) *soakShop {
	t.Helper()
	cfg := pgtest.Config(t)
	cfg.MaxConns = 20 // a connection per partition of the transactional handler, the forwarder, the clients
	pool := pgtest.PoolWith(t, cfg)
	s := &soakShop{brokers: brokerProcess(t), pool: pool, schema: pgtest.Schema(t, pool), payments: kototest.ServiceName(t, "payments")}
	inventory, orders := kototest.ServiceName(t, "inventory"), kototest.ServiceName(t, "orders")
	s.ordersSvc = orders
	base := broker.Config{Brokers: s.brokers}
	logger := kototest.Logger(slog.LevelError)
	var err error
	s.durable, err = cqrs.NewDurableOutbox(kototest.Context(t), pool, cqrs.DurableOutboxConfig{
		Broker: base, Outbox: outbox.Config{Schema: s.schema}, Store: postgres.Config{Schema: s.schema}, Logger: logger,
	})
	if err != nil {
		t.Fatalf("NewDurableOutbox: %v", err)
	}
	t.Cleanup(func() { _ = s.durable.Close() })
	pgtest.Exec(t, pool, fmt.Sprintf(`CREATE TABLE %s (order_id text PRIMARY KEY, total int NOT NULL);
CREATE TABLE %s (order_id text NOT NULL, amount int NOT NULL)`, s.table("orders"), s.table("payments_ledger")))
	if s.orders, err = s.durable.EventPublisher(cqrs.EventPublisherConfig{Service: orders}); err != nil {
		t.Fatalf("orders' EventPublisher: %v", err)
	}
	events, err := s.durable.EventPublisher(cqrs.EventPublisherConfig{Service: s.payments})
	if err != nil {
		t.Fatalf("payments' EventPublisher: %v", err)
	}

	router := kototest.NewRouter(t, nil)
	for _, svc := range []struct {
		name     string
		durable  bool
		consumer cqrs.Consumer
	}{
		{inventory, false, reserveConsumer()},
		{s.payments, true, cqrs.NewEventConsumer(func(ctx context.Context, ev *orderPlaced) error {
			tx, ok := postgres.TxFromContext(ctx)
			if !ok {
				return fmt.Errorf("payments: no transaction in the handler's context")
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+s.table("payments_ledger")+" (order_id, amount) VALUES ($1, $2)", ev.OrderID, ev.Total); err != nil {
				return err
			}
			return events.Publish(ctx, paymentProcessed{OrderID: ev.OrderID, Amount: ev.Total})
		}, cqrs.From(orders), cqrs.LockKeys(soakOrderKey))},
		{orders, false, cqrs.NewEventConsumer(func(_ context.Context, ev *paymentProcessed) error {
			s.paid.Add(ev.OrderID)
			return nil
		}, cqrs.From(s.payments))},
	} {
		cfg := cqrs.ServiceConfig{Name: svc.name, Broker: base, AutoProvisionTopics: true, Logger: logger}
		var service *cqrs.Service
		if svc.durable {
			service, err = s.durable.Service(cfg)
		} else {
			service, err = cqrs.NewService(cfg)
		}
		if err != nil {
			t.Fatalf("service %s: %v", svc.name, err)
		}
		t.Cleanup(func() { _ = service.Close(kototest.Context(t)) })
		if err := service.Register(kototest.Context(t), router, svc.consumer); err != nil {
			t.Fatalf("register %s: %v", svc.name, err)
		}
	}
	kototest.RunRouter(t, router)
	s.commands = startDispatcher(t)(s.durable.CommandDispatcher(cqrs.CommandDispatcherConfig{
		Service: orders, Routes: reserveRoutes(inventory), AutoProvisionTopics: true, Logger: logger,
	}))
	return s
}

// settle waits until every event the orders placed is forwarded and
// consumed, the second placing of the last orders included: a client
// returns once its order is paid, possibly before the duplicate is handled,
// whose charge must be counted too. Each poll checks in causal order: the
// outbox empty (every orderPlaced out, no order being placed), payments
// done with them (every paymentProcessed in the outbox), the outbox empty
// again, orders done with the payments.
func (s *soakShop) settle(t *testing.T) {
	t.Helper()
	placed := topics.Event(s.ordersSvc, topics.TypeName(orderPlaced{}))
	paid := topics.Event(s.payments, topics.TypeName(paymentProcessed{}))
	consumed := func(service, topic string, event any) bool {
		group := topics.ConsumerGroup(service, topics.TypeName(event))
		return kototest.Committed(t, s.brokers, group, topic) == kototest.Records(t, s.brokers, topic)
	}
	outboxEmpty := func() bool {
		return pgtest.QueryInt(t, s.pool, "SELECT count(*) FROM "+s.durable.Outbox().Table()) == 0
	}
	kototest.WaitFor(t, "every order's events forwarded and consumed", func() bool {
		return outboxEmpty() && consumed(s.payments, placed, orderPlaced{}) &&
			outboxEmpty() && consumed(s.ordersSvc, paid, paymentProcessed{})
	})
}

// table returns the quoted name of one of the shop's tables.
func (s *soakShop) table(name string) string { return pgx.Identifier{s.schema, name}.Sanitize() }

// soakOrderKey is the order ID an orderPlaced carries as its partition key.
func soakOrderKey(msg *message.Message) ([]string, error) {
	return []string{msg.Metadata.Get(koto.PartitionKeyMetadataKey)}, nil
}

// order does what the shop's checkout does: it reserves stock by
// request/reply, then writes the order and its orderPlaced in one
// transaction, twice, as a client that retries would, and waits until the
// order is paid.
func (s *soakShop) order(id string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
	defer cancel()
	sku := fmt.Sprintf("sku-%d", n%100)
	if res, err := cqrs.Request[stockReserved](ctx, s.commands, reserveStock{SKU: sku}); err != nil || res.SKU != sku {
		return fmt.Errorf("reserve stock for %s: %+v, %v", id, res, err)
	}
	ev := orderPlaced{OrderID: id, Total: n, Lines: orderLines}
	for range 2 {
		err := s.durable.Outbox().Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
			if err := s.durable.Outbox().LockKeys(ctx, tx, id); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+s.table("orders")+" (order_id, total) VALUES ($1, $2) ON CONFLICT DO NOTHING", id, n); err != nil {
				return err
			}
			return s.orders.Publish(ctx, ev)
		})
		if err != nil {
			return fmt.Errorf("place order %s: %w", id, err)
		}
	}
	for s.paid.Get(id) == 0 {
		if ctx.Err() != nil {
			return fmt.Errorf("order %s not paid within %v", id, kototest.DefaultTimeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}
