package kototest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/outbox"
)

type OrderPlaced struct {
	OrderID string `json:"orderId"`
	Total   int    `json:"total"`
}

type PaymentTaken struct {
	OrderID string `json:"orderId"`
}

type Receipt struct {
	OrderID string `json:"orderId"`
}

// shop is the services under test: payments takes each OrderPlaced's
// payment in its transaction and publishes PaymentTaken through the
// outbox; mail sends a Receipt for each PaymentTaken; a malformed order
// is dead-lettered.
type shop struct {
	h       *kototest.Harness
	durable *cqrs.DurableOutbox
	orders  *cqrs.EventPublisher
}

func newShop(t *testing.T, h *kototest.Harness, slow time.Duration) *shop {
	t.Helper()
	ctx := h.Context()
	_, err := h.Pool().Exec(ctx, "CREATE TABLE "+h.Schema()+".payments (order_id text PRIMARY KEY)")
	if err != nil {
		t.Fatal(err)
	}
	durable, err := cqrs.NewDurableOutbox(ctx, h.Pool(), cqrs.DurableOutboxConfig{
		Broker: h.Broker(), Outbox: outbox.Config{Schema: h.Schema()}, Store: postgres.Config{Schema: h.Schema()}, Logger: h.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Defer(func() { _ = durable.Close() })
	s := &shop{h: h, durable: durable}
	s.orders, err = durable.EventPublisher(cqrs.EventPublisherConfig{Service: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	taken, err := durable.EventPublisher(cqrs.EventPublisherConfig{Service: "payments"})
	if err != nil {
		t.Fatal(err)
	}
	payments, err := durable.Service(cqrs.ServiceConfig{Name: "payments", Broker: h.Broker(), AutoProvisionTopics: true, Logger: h.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	h.Defer(func() { _ = payments.Close(context.Background()) })
	err = payments.Register(ctx, h.Router(), cqrs.NewEventConsumer(func(ctx context.Context, ev *OrderPlaced) error {
		if ev.Total < 0 {
			return koto.Poison(errors.New("negative total"))
		}
		time.Sleep(slow) // a slow dependency
		tx, _ := postgres.TxFromContext(ctx)
		if _, err := tx.Exec(ctx, "INSERT INTO "+h.Schema()+".payments VALUES ($1)", ev.OrderID); err != nil {
			return err
		}
		return taken.Publish(ctx, PaymentTaken{OrderID: ev.OrderID})
	}, cqrs.From("orders")))
	if err != nil {
		t.Fatal(err)
	}
	mail, err := cqrs.NewService(cqrs.ServiceConfig{Name: "mail", Broker: h.Broker(), AutoProvisionTopics: true, Logger: h.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	h.Defer(func() { _ = mail.Close(context.Background()) })
	receipts, err := cqrs.NewEventPublisher(kototestPublisher(t, h), cqrs.EventPublisherConfig{Service: "mail"})
	if err != nil {
		t.Fatal(err)
	}
	err = mail.Register(ctx, h.Router(), cqrs.NewEventConsumer(func(ctx context.Context, ev *PaymentTaken) error {
		return receipts.Publish(ctx, Receipt(*ev))
	}, cqrs.From("payments")))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// kototestPublisher is a publisher on the harness's broker, closed after
// the router.
func kototestPublisher(t *testing.T, h *kototest.Harness) message.Publisher {
	t.Helper()
	pub, err := broker.NewPublisher(h.Broker())
	if err != nil {
		t.Fatal(err)
	}
	h.Defer(func() { _ = pub.Close() })
	return pub
}

func (s *shop) place(t *testing.T, orders ...OrderPlaced) {
	t.Helper()
	err := s.durable.Outbox().Transact(correlation.WithID(s.h.Context(), "checkout"), func(ctx context.Context, tx pgx.Tx) error {
		for _, o := range orders {
			if err := s.orders.Publish(ctx, o); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWaitFollowsEverythingAMessageCauses: orders placed through the
// outbox, paid by a transactional consumer that publishes through the
// outbox, mailed by a consumer that publishes a receipt nobody reads:
// after one Wait every order is paid and mailed, and the malformed one is
// dead-lettered.
func TestWaitFollowsEverythingAMessageCauses(t *testing.T) {
	h := kototest.New(t, kototest.Sinks("mail.receipt"))
	s := newShop(t, h, 0)
	h.Run()
	s.place(t, OrderPlaced{OrderID: "o-1", Total: 10}, OrderPlaced{OrderID: "o-2", Total: 20}, OrderPlaced{OrderID: "o-bad", Total: -1})
	h.Wait()

	if got := kototest.Consumed[PaymentTaken](h, kototest.Handled); len(got) != 2 {
		t.Errorf("%d PaymentTaken handled, want 2: %v", len(got), got)
	}
	if dl := h.DeadLetters(); len(dl) != 1 || !strings.Contains(dl[0].Err.Error(), "negative total") {
		t.Errorf("dead letters %v, want o-bad's", dl)
	}
	var paid int
	if err := h.Pool().QueryRow(h.Context(), "SELECT count(*) FROM "+h.Schema()+".payments").Scan(&paid); err != nil || paid != 2 {
		t.Errorf("%d payments (%v), want 2", paid, err)
	}
}

// TestWaitWaitsForSlowHandlers: a handler that takes 2 s, and one whose
// follow-up comes a second later and is handled by another service.
func TestWaitWaitsForSlowHandlers(t *testing.T) {
	h := kototest.New(t, kototest.Sinks("mail.receipt"))
	s := newShop(t, h, 2*time.Second)
	h.Run()
	s.place(t, OrderPlaced{OrderID: "o-1", Total: 10})
	h.Wait()
	if got := kototest.Consumed[PaymentTaken](h, kototest.Handled); len(got) != 1 {
		t.Errorf("%d PaymentTaken handled after Wait, want 1", len(got))
	}
	h.NoDeadLetters()
}

// TestWaitNamesWhatNoOneConsumes: a topic with records that no group
// reads keeps Wait waiting, and its failure names the topic and offsets.
func TestWaitNamesWhatNoOneConsumes(t *testing.T) {
	h := kototest.New(t, kototest.WithoutPostgres())
	pub := kototestPublisher(t, h)
	h.Run()
	for range 3 {
		if err := pub.Publish("billing.invoice-sent", message.NewMessage(watermill.NewUUID(), []byte("{}"))); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := h.WaitContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "billing.invoice-sent") || !strings.Contains(err.Error(), "no consumer group reads") {
		t.Fatalf("WaitContext = %v, want it to name billing.invoice-sent and that no group reads it", err)
	}
	t.Log(err)
}

// TestInvoke calls a transactional consumer's function without a broker,
// with a correlation ID and a transaction of the test's database.
func TestInvoke(t *testing.T) {
	h := kototest.New(t)
	ctx := kototest.InTx(t, h.Pool())
	tx, _ := postgres.TxFromContext(ctx)
	if _, err := tx.Exec(ctx, "CREATE TABLE "+h.Schema()+".charges (order_id text, correlation text)"); err != nil {
		t.Fatal(err)
	}
	charge := cqrs.NewEventConsumer(func(ctx context.Context, ev *OrderPlaced) error {
		tx, ok := postgres.TxFromContext(ctx)
		if !ok {
			return errors.New("no transaction")
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+h.Schema()+".charges VALUES ($1, $2)", ev.OrderID, correlation.FromContext(ctx))
		return err
	}, cqrs.From("orders"))
	if err := kototest.Invoke(t, charge, OrderPlaced{OrderID: "o-7"}, kototest.InContext(ctx), kototest.WithCorrelationID("c-7")); err != nil {
		t.Fatal(err)
	}
	var order, corr string
	if err := tx.QueryRow(ctx, "SELECT order_id, correlation FROM "+h.Schema()+".charges").Scan(&order, &corr); err != nil {
		t.Fatal(err)
	}
	if order != "o-7" || corr != "c-7" {
		t.Errorf("charge (%q, %q), want (o-7, c-7)", order, corr)
	}
}

// TestCutPostgres: with the database cut, an order's payment is retried in
// place, in flight, and Wait does not return; once restored it is paid
// once, and nothing was dead-lettered.
func TestCutPostgres(t *testing.T) {
	h := kototest.New(t, kototest.WithPostgresFaults(), kototest.Sinks("mail.receipt"))
	s := newShop(t, h, 0)
	h.Run()
	h.CutPostgres()
	pub := kototestPublisher(t, h)
	direct, err := cqrs.NewEventPublisher(pub, cqrs.EventPublisherConfig{Service: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.Publish(h.Context(), OrderPlaced{OrderID: "o-1", Total: 10}); err != nil {
		t.Fatal(err)
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := h.WaitContext(ctx)
		cancel()
		if err == nil {
			t.Fatal("Wait returned while the database was cut")
		}
		if strings.Contains(err.Error(), "in flight: handler payments.order-placed-consumer") {
			break
		}
	}
	h.RestorePostgres()
	h.Wait()
	h.NoDeadLetters()
	if got := kototest.Consumed[PaymentTaken](h, kototest.Handled); len(got) != 1 {
		t.Errorf("%d PaymentTaken handled, want 1", len(got))
	}
	_ = s
}
