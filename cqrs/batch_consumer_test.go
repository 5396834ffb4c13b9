package cqrs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

// TestBatchEventConsumer: orders publishes 300 OrderSubmitted through the
// outbox, 30 of them twice (the same message ID), and one whose payload
// does not decode; payments handles them with a batch consumer of the
// DurableOutbox's Service that writes an effect per order and publishes a
// PaymentSettled per order through the outbox, in the batch's
// transaction. Each order has one effect and one PaymentSettled, with the
// order's correlation ID; the undecodable message is dead-lettered alone;
// the batches hold many events.
func TestBatchEventConsumer(t *testing.T) {
	const orders = 300
	e := newDurableEnv(t)
	ordersSvc, payments := kototest.ServiceName(t, "orders"), kototest.ServiceName(t, "payments")
	ordersEvents, err := e.d.EventPublisher(cqrs.EventPublisherConfig{Service: ordersSvc})
	if err != nil {
		t.Fatal(err)
	}
	paymentsEvents, err := e.d.EventPublisher(cqrs.EventPublisherConfig{Service: payments})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	largest := 0
	settled := make(chan seen, 2*orders)
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err = e.service(payments).Register(kototest.Context(t), r, cqrs.NewBatchEventConsumer(func(ctx context.Context, batch []cqrs.BatchItem[OrderSubmitted]) error {
		mu.Lock()
		largest = max(largest, len(batch))
		mu.Unlock()
		tx, ok := postgres.TxFromContext(ctx)
		if !ok {
			return koto.Poison(errors.New("no transaction in the batch's context"))
		}
		rows := make([][]any, len(batch))
		for i, it := range batch {
			rows[i] = []any{"charge " + it.Event.OrderID}
			// The item's context carries its correlation ID and the batch's transaction.
			if err := paymentsEvents.Publish(it.Message.Context(), PaymentSettled{OrderID: it.Event.OrderID}); err != nil {
				return err
			}
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{e.schema, "effects"}, []string{"what"}, pgx.CopyFromRows(rows))
		return err
	}, cqrs.From(ordersSvc), cqrs.WithBatch(broker.BatchConfig{MaxMessages: 100})))
	if err != nil {
		t.Fatalf("Register payments: %v", err)
	}
	err = e.service(ordersSvc).Register(kototest.Context(t), r, cqrs.NewEventConsumer(func(ctx context.Context, ev *PaymentSettled) error {
		settled <- observe(ctx, ev.OrderID)
		return nil
	}, cqrs.From(payments)))
	if err != nil {
		t.Fatalf("Register orders: %v", err)
	}
	kototest.RunRouter(t, r)

	ctx := kototest.Context(t)
	for i := range orders {
		id := fmt.Sprintf("o-%d", i)
		for range 1 + btoi(i%10 == 3) {
			err := e.d.Outbox().Transact(correlation.WithID(ctx, "checkout-"+id), func(ctx context.Context, tx pgx.Tx) error {
				return ordersEvents.Publish(ctx, OrderSubmitted{OrderID: id})
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	bad := message.NewMessage("01939a4e-0000-7000-8000-000000000001", []byte("{not json"))
	bad.Metadata.Set(koto.TypeNameMetadataKey, "order-submitted")
	dead := kototest.NewSubscriber(t, broker.Config{Brokers: e.brokers, ConsumerGroup: kototest.Group(t, "dlq")})
	dlq := kototest.Subscribe(t, dead, topics.DeadLetter(topics.ConsumerGroup(payments, "order-submitted")))
	if err := e.d.Outbox().Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
		bad.SetContext(ctx)
		return e.d.Outbox().ContextPublisher().Publish(topics.Event(ordersSvc, "order-submitted"), bad)
	}); err != nil {
		t.Fatal(err)
	}

	got := map[string]seen{}
	for len(got) < orders {
		s := kototest.Receive(t, settled, "PaymentSettled")
		if _, dup := got[s.orderID]; dup {
			t.Fatalf("PaymentSettled of %s twice", s.orderID)
		}
		got[s.orderID] = s
	}
	for id, s := range got {
		if want := "checkout-" + id; s.ctxCorrelation != want {
			t.Errorf("PaymentSettled of %s: correlation %q, want %q", id, s.ctxCorrelation, want)
		}
	}
	for i := range orders {
		if n := e.effects(fmt.Sprintf("charge o-%d", i)); n != 1 {
			t.Errorf("%d effects of order o-%d, want 1", n, i)
		}
	}
	if dl := kototest.Receive(t, dlq, "the dead letter of the undecodable event"); dl.UUID != bad.UUID {
		t.Errorf("dead letter %s, want %s", dl.UUID, bad.UUID)
	} else {
		dl.Ack()
	}
	mu.Lock()
	defer mu.Unlock()
	if largest < 10 {
		t.Errorf("the largest batch had %d events, want many", largest)
	}
	t.Logf("largest batch %d", largest)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
