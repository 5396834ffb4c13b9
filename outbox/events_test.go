package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/outbox"
)

// OrderPlaced is a domain event of order.
type OrderPlaced struct {
	OrderID string `json:"order_id"`
}

// PartitionKey keeps one order's events in order on one partition.
func (e OrderPlaced) PartitionKey() string { return e.OrderID }

// OrderPaid is another.
type OrderPaid struct {
	OrderID string `json:"order_id"`
}

func (e OrderPaid) PartitionKey() string { return e.OrderID }

// order is an aggregate that records its events.
type order struct {
	outbox.Events
	ID string
}

func (o *order) place() { o.Record(OrderPlaced{OrderID: o.ID}) }
func (o *order) pay()   { o.Record(OrderPaid{OrderID: o.ID}) }

// TestDomainEvents: events written in a transaction that rolls back stay
// on the aggregate and none is published; in one that commits they are
// published, in order, and cleared. Saving an aggregate twice in one
// transaction writes each event once.
func TestDomainEvents(t *testing.T) {
	e := newEnv(t)
	service := kototest.Topic(t, "shop")
	r := newReader(t, e.brokers, service+".order-placed", service+".order-paid")
	e.startForwarder(e.forwarderConfig())
	pub, err := cqrs.NewEventPublisher(e.o.ContextPublisher(), cqrs.EventPublisherConfig{Service: service})
	if err != nil {
		t.Fatal(err)
	}
	o := &order{ID: "order-1"}
	o.place()

	errRollback := errors.New("rollback")
	err = e.o.Transact(kototest.Context(t), func(ctx context.Context, tx pgx.Tx) error {
		if err := outbox.PublishDomainEvents(ctx, pub, o); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if n := len(o.DomainEvents()); n != 1 {
		t.Fatalf("after the rollback the aggregate has %d events, want 1", n)
	}
	r.none(2 * testPoll)

	err = e.o.Transact(kototest.Context(t), func(ctx context.Context, tx pgx.Tx) error {
		if err := outbox.PublishDomainEvents(ctx, pub, o); err != nil {
			return err
		}
		o.pay()
		if err := outbox.PublishDomainEvents(ctx, pub, o); err != nil { // saved again
			return err
		}
		if n := len(o.DomainEvents()); n != 2 {
			t.Errorf("before the commit the aggregate has %d events, want 2", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(o.DomainEvents()); n != 0 {
		t.Fatalf("after the commit the aggregate has %d events, want 0", n)
	}
	byName := map[string]record{}
	for _, rec := range r.next(2) { // two topics: no order between them
		byName[rec.Headers["name"]] = rec
	}
	placed, paid := byName["order-placed"], byName["order-paid"]
	if placed.Key != "order-1" || paid.Key != "order-1" || placed.Headers["correlation_id"] == "" {
		t.Fatalf("records %+v", byName)
	}
	r.none(2 * testPoll)
}

// TestDomainEventsNeedTheOutbox: without a bound transaction, or with a
// publisher that does not write into the outbox, PublishDomainEvents
// fails and leaves the events on the aggregate.
func TestDomainEventsNeedTheOutbox(t *testing.T) {
	e := newEnv(t)
	pub, err := cqrs.NewEventPublisher(e.o.ContextPublisher(), cqrs.EventPublisherConfig{Service: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	o := &order{ID: "order-2"}
	o.place()
	if err := outbox.PublishDomainEvents(context.Background(), pub, o); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("without a transaction: %v, want ErrNoTransaction", err)
	}
	direct := kototest.NewPublisher(t, broker.Config{Brokers: e.brokers})
	kafkaPub, err := cqrs.NewEventPublisher(direct, cqrs.EventPublisherConfig{Service: kototest.Topic(t, "direct")})
	if err != nil {
		t.Fatal(err)
	}
	err = e.o.Transact(kototest.Context(t), func(ctx context.Context, tx pgx.Tx) error {
		return outbox.PublishDomainEvents(ctx, kafkaPub, o)
	})
	if !errors.Is(err, outbox.ErrNotThroughOutbox) {
		t.Fatalf("with a Kafka publisher: %v, want ErrNotThroughOutbox", err)
	}
	if len(o.DomainEvents()) != 1 {
		t.Fatal("the events were cleared")
	}
	var value order
	if err := e.o.Transact(kototest.Context(t), func(ctx context.Context, tx pgx.Tx) error {
		return outbox.PublishDomainEvents(ctx, pub, notPointer{&value})
	}); err == nil {
		t.Fatal("an aggregate that is not a pointer was accepted")
	}
}

// notPointer is an Aggregate that is not a pointer.
type notPointer struct{ o *order }

func (n notPointer) DomainEvents() []any { return n.o.DomainEvents() }
func (n notPointer) ClearDomainEvents()  { n.o.ClearDomainEvents() }
