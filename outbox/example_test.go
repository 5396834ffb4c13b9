package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
)

// An order row and its OrderPlaced event commit in one transaction; the
// forwarder takes the event to Kafka. The example runs against the
// PostgreSQL at DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable), in a schema of
// its own that it drops at the end, and an embedded Kafka broker.
func Example() {
	ctx := context.Background()
	pool, schema := pgtest.ExampleDatabase(ctx)
	defer pool.Close()
	defer pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	kafka, err := embedded.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer kafka.Close()
	brokers := broker.Config{Brokers: kafka.Addrs()}

	box, err := outbox.New(pool, outbox.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	if err := box.Setup(ctx); err != nil { // at startup: the tables
		panic(err)
	}
	fwd, err := outbox.NewForwarder(box, outbox.ForwarderConfig{Broker: brokers, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	go fwd.Run(ctx)
	defer fwd.Close()

	// The order and its event commit together, or neither does.
	_, _ = pool.Exec(ctx, "CREATE TABLE "+schema+".orders (id text PRIMARY KEY)")
	events, err := cqrs.NewEventPublisher(box.ContextPublisher(), cqrs.EventPublisherConfig{Service: "orders"})
	if err != nil {
		panic(err)
	}
	err = box.Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
		// The order's key first: its events then reach Kafka in commit order.
		if err := box.LockKeys(ctx, tx, "order-1"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".orders VALUES ('order-1')"); err != nil {
			return err
		}
		return events.Publish(ctx, OrderPlaced{OrderID: "order-1"})
	})
	if err != nil {
		panic(err)
	}

	msg := receive(ctx, brokers, "orders.order-placed")
	fmt.Println(msg.Metadata.Get("name"), string(msg.Payload), "key", msg.Metadata.Get(koto.PartitionKeyMetadataKey))
	// Output:
	// order-placed {"order_id":"order-1"} key order-1
}

// An aggregate records its events; PublishDomainEvents writes them in the
// transaction that saves it, and they are cleared only once it commits.
func ExamplePublishDomainEvents() {
	ctx := context.Background()
	pool, schema := pgtest.ExampleDatabase(ctx)
	defer pool.Close()
	defer pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	box, err := outbox.New(pool, outbox.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	if err := box.Setup(ctx); err != nil {
		panic(err)
	}
	events, err := cqrs.NewEventPublisher(box.ContextPublisher(), cqrs.EventPublisherConfig{Service: "orders"})
	if err != nil {
		panic(err)
	}

	o := &order{ID: "order-7"} // embeds outbox.Events
	o.place()
	save := func(fail bool) error {
		return box.Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
			// ... save the order with tx ...
			if err := outbox.PublishDomainEvents(ctx, events, o); err != nil {
				return err
			}
			if fail {
				return fmt.Errorf("the save failed")
			}
			return nil
		})
	}
	fmt.Println(save(true), "- events kept:", len(o.DomainEvents()))
	fmt.Println(save(false), "- events kept:", len(o.DomainEvents()))
	// Output:
	// the save failed - events kept: 1
	// <nil> - events kept: 0
}

// receive returns the first message on topic.
func receive(ctx context.Context, cfg broker.Config, topic string) *message.Message {
	cfg.ConsumerGroup = "example"
	sub, err := broker.NewSubscriber(cfg)
	if err != nil {
		panic(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		panic(err)
	}
	msg, ok := <-msgs
	if !ok {
		panic("no message on " + topic)
	}
	msg.Ack()
	return msg
}

// Status reads an outbox table's backlog: here two committed messages that
// no forwarder has taken yet.
func ExampleOutbox_Status() {
	ctx := context.Background()
	pool, schema := pgtest.ExampleDatabase(ctx)
	defer pool.Close()
	defer pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	box, err := outbox.New(pool, outbox.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	if err := box.Setup(ctx); err != nil {
		panic(err)
	}
	err = box.Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
		return box.Publisher(tx).Publish("orders.order-placed",
			message.NewMessage("order-1", []byte(`{}`)), message.NewMessage("order-2", []byte(`{}`)))
	})
	if err != nil {
		panic(err)
	}

	s, err := box.Status(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("waiting", s.Waiting, "oldest known", !s.Oldest.IsZero(), "forwarder active", s.Forwarder != nil)
	// Output:
	// waiting 2 oldest known true forwarder active false
}

// A reminder scheduled for tomorrow, in the transaction that creates the
// order, and cancelled in a later one: it is never sent. A message due
// already is sent at once; cancelling it once sent says so.
func ExamplePublisher_Schedule() {
	ctx := context.Background()
	box, brokers, stop := forwarding(ctx) // as in the package's Example
	defer stop()

	var reminder, now string
	err := box.Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
		// ... write the order with tx ...
		var err error
		pub := box.Publisher(tx)
		if reminder, err = pub.ScheduleAfter(24*time.Hour, "orders.reminder", message.NewMessage("reminder-1", []byte(`{}`))); err != nil {
			return err
		}
		now, err = pub.Schedule(time.Now(), "orders.reminder", message.NewMessage("reminder-2", []byte(`{}`)))
		return err
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("cancel tomorrow's:", box.AutoTxPublisher().Cancel(ctx, reminder))
	fmt.Println("received:", receive(ctx, brokers, "orders.reminder").UUID)
	err = box.AutoTxPublisher().Cancel(ctx, now)
	fmt.Println("cancel the one sent:", errors.Is(err, outbox.ErrSent))
	// Output:
	// cancel tomorrow's: <nil>
	// received: reminder-2
	// cancel the one sent: true
}

// forwarding is Example's outbox, with its forwarder running on an
// embedded broker, in a schema that stop drops.
func forwarding(ctx context.Context) (*outbox.Outbox, broker.Config, func()) {
	pool, schema := pgtest.ExampleDatabase(ctx)
	kafka, err := embedded.Start(ctx)
	if err != nil {
		panic(err)
	}
	brokers := broker.Config{Brokers: kafka.Addrs()}
	box, err := outbox.New(pool, outbox.Config{Schema: schema})
	if err == nil {
		err = box.Setup(ctx)
	}
	if err != nil {
		panic(err)
	}
	fwd, err := outbox.NewForwarder(box, outbox.ForwarderConfig{Broker: brokers, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	go fwd.Run(ctx)
	return box, brokers, func() {
		_ = fwd.Close()
		_ = kafka.Close()
		_, _ = pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		pool.Close()
	}
}
