package cqrs_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill"
	wcqrs "github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// StockReserved carries its own message ID and partition key.
type StockReserved struct {
	ID  string `json:"id"`
	SKU string `json:"sku"`
}

func (e StockReserved) MessageID() string    { return e.ID }
func (e StockReserved) PartitionKey() string { return e.SKU }

// counter counts handled IDs and signals each handling.
type counter struct {
	kototest.Counter
	handled chan string
}

func newCounter() *counter { return &counter{handled: make(chan string, 64)} }

func (c *counter) add(id string) {
	c.Add(id)
	c.handled <- id
}

// deadLetters reads a dead-letter topic from its start; it keeps the first
// 64 messages the test has not read.
func deadLetters(t *testing.T, brokers []string, topic string) <-chan *message.Message {
	t.Helper()
	out := make(chan *message.Message, 64)
	kototest.Watch(t, brokers, topic, func(msg *message.Message) {
		select {
		case out <- msg:
		default:
		}
	})
	return out
}

// TestEventConsumerIdempotentWithDeadLetters publishes an event twice with
// one ID, a poison message and a second event on one partition: the
// handler sees each event once, the poison goes to the dead-letter topic.
// The store is chosen after Register.
func TestEventConsumerIdempotentWithDeadLetters(t *testing.T) {
	brokers := kototest.Brokers(t)
	inventory, shipping := kototest.ServiceName(t, "inventory"), kototest.ServiceName(t, "shipping")
	pub := kototest.NewPublisher(t, broker.Config{Brokers: brokers})
	events, err := cqrs.NewEventPublisher(pub, cqrs.EventPublisherConfig{Service: inventory})
	if err != nil {
		t.Fatal(err)
	}

	c := newCounter()
	store := idempotency.NewMemoryStore(0)
	t.Cleanup(func() { _ = store.Close() })
	svc := newService(t, brokers, cqrs.ServiceConfig{Name: shipping, AutoProvisionTopics: true, Store: store})
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err = svc.Register(kototest.Context(t), r, cqrs.NewEventConsumer(func(ctx context.Context, ev *StockReserved) error {
		if got := wcqrs.OriginalMessageFromCtx(ctx).UUID; got != ev.ID {
			t.Errorf("message UUID = %q, want the event's own ID %q", got, ev.ID)
		}
		c.add(ev.ID)
		return nil
	}, cqrs.From(inventory)))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	group := topics.ConsumerGroup(shipping, "stock-reserved")
	dlq := deadLetters(t, brokers, topics.DeadLetter(group))
	kototest.RunRouter(t, r)

	ctx := kototest.Context(t)
	a := StockReserved{ID: "0190c3a4-0000-7000-8000-00000000000a", SKU: "sku-1"}
	b := StockReserved{ID: "0190c3a4-0000-7000-8000-00000000000b", SKU: "sku-1"}
	for _, ev := range []StockReserved{a, a} {
		if err := events.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	poison := message.NewMessage("0190c3a4-0000-7000-8000-0000000000ff", []byte("{not json"))
	poison.Metadata.Set(koto.TypeNameMetadataKey, "stock-reserved")
	poison.Metadata.Set(koto.PartitionKeyMetadataKey, "sku-1")
	if err := pub.Publish(topics.Event(inventory, "stock-reserved"), poison); err != nil {
		t.Fatal(err)
	}
	if err := events.Publish(ctx, b); err != nil {
		t.Fatal(err)
	}

	// One partition keeps the order: when b is handled, the rest is done.
	for kototest.Receive(t, c.handled, "event b") != b.ID {
	}
	if n := c.Get(a.ID); n != 1 {
		t.Errorf("event a handled %d times, want 1", n)
	}
	dead := kototest.Receive(t, dlq, "the dead letter")
	if dead.UUID != poison.UUID {
		t.Errorf("dead letter %s, want the poison message %s", dead.UUID, poison.UUID)
	}
	if dead.Metadata.Get("dead_letter_reason") == "" {
		t.Errorf("dead letter has no reason: %v", dead.Metadata)
	}
	// The mark follows the handler's return: wait for it.
	kototest.WaitFor(t, "2 marks in the configured store", func() bool { return store.Len() == 2 })
}

// TestExplicitRoute routes an event type to a topic of its own on both
// sides.
func TestExplicitRoute(t *testing.T) {
	brokers := kototest.Brokers(t)
	custom := kototest.Topic(t, "orders.placed-v2")
	events, err := cqrs.NewEventPublisher(kototest.NewPublisher(t, broker.Config{Brokers: brokers}), cqrs.EventPublisherConfig{
		Service: "orders",
		Routes:  []cqrs.Route{cqrs.RouteOf[OrderPlacedEvent](custom)},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	svc := newService(t, brokers, cqrs.ServiceConfig{Name: kototest.ServiceName(t, "billing"), AutoProvisionTopics: true})
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err = svc.Register(kototest.Context(t), r, cqrs.NewEventConsumer(func(ctx context.Context, ev *OrderPlacedEvent) error {
		got <- message.SubscribeTopicFromCtx(ctx) + " " + ev.OrderID
		return nil
	}, cqrs.Topic(custom)))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	kototest.RunRouter(t, r)
	if err := events.Publish(kototest.Context(t), &OrderPlacedEvent{OrderID: "o-7"}); err != nil {
		t.Fatal(err)
	}
	if g := kototest.Receive(t, got, "the routed event"); g != custom+" o-7" {
		t.Errorf("handled %q, want %q", g, custom+" o-7")
	}
}

// TestSend sends fire-and-forget commands: one is handled with the
// sender's correlation ID, a failing one is retried and dead-lettered.
func TestSend(t *testing.T) {
	brokers := kototest.Brokers(t)
	payments := kototest.ServiceName(t, "payments")
	pub := kototest.NewPublisher(t, broker.Config{Brokers: brokers})
	d, err := cqrs.NewCommandDispatcher(pub, cqrs.CommandDispatcherConfig{
		Service: kototest.ServiceName(t, "orders"),
		Routes:  []cqrs.Route{cqrs.RouteOf[ChargeCardCommand](topics.Command(payments, "charge-card"))},
		Broker:  broker.Config{Brokers: brokers},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() }) // Send needs no Start

	handled := make(chan string, 4)
	svc := newService(t, brokers, cqrs.ServiceConfig{
		Name: payments, AutoProvisionTopics: true,
		DeadLetter: middleware.DeadLetterConfig{MaxAttempts: 2},
	})
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err = svc.Register(kototest.Context(t), r, cqrs.NewCommandConsumer(func(ctx context.Context, cmd *ChargeCardCommand) error {
		if cmd.Fail != "" {
			return errors.New("card service down")
		}
		handled <- cmd.ID + " " + correlation.FromContext(ctx)
		return nil
	}))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	dlq := deadLetters(t, brokers, topics.DeadLetter(topics.ConsumerGroup(payments, "charge-card")))
	kototest.RunRouter(t, r)

	ctx := correlation.WithID(kototest.Context(t), "corr-send")
	if err := d.Send(ctx, ChargeCardCommand{ID: "c-fail", Fail: "yes"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Send(ctx, ChargeCardCommand{ID: "c-ok"}); err != nil {
		t.Fatal(err)
	}
	if g := kototest.Receive(t, handled, "the command"); g != "c-ok corr-send" {
		t.Errorf("handled %q, want %q", g, "c-ok corr-send")
	}
	dead := kototest.Receive(t, dlq, "the dead letter")
	if got := dead.Metadata.Get("dead_letter_attempts"); got != "2" {
		t.Errorf("dead letter after %s attempts, want 2", got)
	}
	if !strings.Contains(string(dead.Payload), "c-fail") {
		t.Errorf("dead letter payload %s, want the failing command", dead.Payload)
	}
}

// TestRegisterRejects checks what Register refuses before it adds anything.
func TestRegisterRejects(t *testing.T) {
	noop := func(context.Context, *OrderPlacedEvent) error { return nil }
	type unnamed = struct{ X int }
	tests := []struct {
		name     string
		consumer cqrs.Consumer
		want     error
		mention  string
	}{
		{"invalid topic", cqrs.NewEventConsumer(noop, cqrs.Topic("bad topic!")), cqrs.ErrInvalidRoute, `"bad topic!"`},
		{"invalid producer", cqrs.NewEventConsumer(noop, cqrs.From("or/ders")), cqrs.ErrInvalidRoute, `or/ders`},
		{"event without topic", cqrs.NewEventConsumer(noop), koto.ErrInvalidConfig, "cqrs.From"},
		{"command with From", cqrs.NewCommandConsumer(func(context.Context, *ChargeCardCommand) error { return nil }, cqrs.From("x")),
			koto.ErrInvalidConfig, "From does not apply"},
		{"unnamed type", cqrs.NewEventConsumer(func(context.Context, *unnamed) error { return nil }, cqrs.From("x")), koto.ErrInvalidConfig, "no name"},
		{"invalid group", cqrs.NewEventConsumer(noop, cqrs.From("orders"), cqrs.ConsumerGroup("a b")), cqrs.ErrInvalidRoute, `"a b.dlq"`},
	}
	svc := newService(t, []string{"127.0.0.1:1"}, cqrs.ServiceConfig{Name: "billing"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
			ok := cqrs.NewEventConsumer(noop, cqrs.From("orders"))
			err := svc.Register(context.Background(), r, ok, tt.consumer)
			if !errors.Is(err, tt.want) || !errors.Is(err, koto.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("Register: %v, want %v and ErrInvalidConfig mentioning %s", err, tt.want, tt.mention)
			}
			if n := len(r.Handlers()); n != 0 {
				t.Errorf("a rejected Register added %d handlers", n)
			}
		})
	}

	t.Run("duplicate group", func(t *testing.T) {
		r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
		err := svc.Register(context.Background(), r, cqrs.NewEventConsumer(noop, cqrs.From("orders")), cqrs.NewEventConsumer(noop, cqrs.From("shop")))
		if !errors.Is(err, koto.ErrInvalidConfig) || !strings.Contains(err.Error(), "billing.order-placed-consumer") {
			t.Fatalf("Register: %v, want the duplicate group named", err)
		}
	})
}

// TestRoutesRejected checks that constructors refuse invalid routes and
// name them.
func TestRoutesRejected(t *testing.T) {
	pub := kototest.NewPublisher(t, broker.Config{Brokers: kototest.Brokers(t)})
	bad := []cqrs.Route{cqrs.RouteOf[OrderPlacedEvent]("orders placed")}
	_, err := cqrs.NewEventPublisher(pub, cqrs.EventPublisherConfig{Service: "orders", Routes: bad})
	if !errors.Is(err, cqrs.ErrInvalidRoute) || !errors.Is(err, koto.ErrInvalidConfig) || !errors.Is(err, topics.ErrInvalid) || !strings.Contains(err.Error(), `"orders placed"`) ||
		!strings.Contains(err.Error(), "order-placed") {
		t.Errorf("NewEventPublisher: %v, want ErrInvalidRoute naming the route", err)
	}
	_, err = cqrs.NewCommandDispatcher(pub, cqrs.CommandDispatcherConfig{Service: "orders", Routes: bad, Broker: broker.Config{Brokers: []string{"127.0.0.1:1"}}})
	if !errors.Is(err, cqrs.ErrInvalidRoute) || !strings.Contains(err.Error(), `"orders placed"`) {
		t.Errorf("NewCommandDispatcher: %v, want ErrInvalidRoute naming the route", err)
	}
	twice := []cqrs.Route{cqrs.RouteOf[OrderPlacedEvent]("a"), cqrs.RouteOf[OrderPlacedEvent]("b")}
	if _, err := cqrs.NewEventPublisher(pub, cqrs.EventPublisherConfig{Service: "orders", Routes: twice}); !errors.Is(err, cqrs.ErrInvalidRoute) {
		t.Errorf("two routes of one type: %v, want ErrInvalidRoute", err)
	}
	if _, err := cqrs.NewEventPublisher(pub, cqrs.EventPublisherConfig{}); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("no service: %v, want ErrInvalidConfig", err)
	}
	if _, err := cqrs.NewEventPublisher(nil, cqrs.EventPublisherConfig{Service: "orders"}); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("nil publisher: %v, want ErrInvalidConfig", err)
	}
}

// TestOtherTypesOnATopic reads one topic that carries two types with two
// consumers: the strict one dead-letters the other type, the one with
// SkipOtherTypes acks it, and both handle a message without a type name.
func TestOtherTypesOnATopic(t *testing.T) {
	brokers := kototest.Brokers(t)
	shared, shipping := kototest.Topic(t, "inventory.stock"), kototest.ServiceName(t, "shipping")
	pub := kototest.NewPublisher(t, broker.Config{Brokers: brokers})
	events, err := cqrs.NewEventPublisher(pub, cqrs.EventPublisherConfig{Service: "inventory", Routes: []cqrs.Route{
		cqrs.RouteOf[StockReserved](shared), cqrs.RouteOf[OrderPlacedEvent](shared),
	}})
	if err != nil {
		t.Fatal(err)
	}
	// One partition everywhere: each consumer sees the messages in order,
	// and a dead-letter topic keeps the order of what is published to it.
	svc := newService(t, brokers, cqrs.ServiceConfig{Name: shipping, AutoProvisionTopics: true, Broker: broker.Config{Provision: broker.ProvisionConfig{Partitions: 1}}})
	reserved, placed := make(chan string, 4), make(chan string, 4)
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err = svc.Register(kototest.Context(t), r,
		cqrs.NewEventConsumer(func(_ context.Context, ev *StockReserved) error { reserved <- ev.ID; return nil }, cqrs.Topic(shared)),
		cqrs.NewEventConsumer(func(_ context.Context, ev *OrderPlacedEvent) error { placed <- ev.OrderID; return nil },
			cqrs.Topic(shared), cqrs.SkipOtherTypes()),
	)
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	strictDLQ := topics.DeadLetter(topics.ConsumerGroup(shipping, "stock-reserved"))
	skippingDLQ := topics.DeadLetter(topics.ConsumerGroup(shipping, "order-placed"))
	strictDead, skippingDead := deadLetters(t, brokers, strictDLQ), deadLetters(t, brokers, skippingDLQ)
	kototest.RunRouter(t, r)

	ctx := kototest.Context(t)
	if err := events.Publish(ctx, StockReserved{ID: "r-1"}); err != nil {
		t.Fatal(err)
	}
	if err := events.Publish(ctx, OrderPlacedEvent{OrderID: "o-1"}); err != nil {
		t.Fatal(err)
	}
	untyped := message.NewMessage(watermill.NewUUID(), []byte(`{"id":"r-2","orderId":"o-2"}`))
	if err := pub.Publish(shared, untyped); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"r-1", "r-2"} {
		if got := kototest.Receive(t, reserved, "a stock-reserved"); got != want {
			t.Errorf("strict consumer handled %q, want %q", got, want)
		}
	}
	for _, want := range []string{"o-1", "o-2"} {
		if got := kototest.Receive(t, placed, "an order-placed"); got != want {
			t.Errorf("skipping consumer handled %q, want %q", got, want)
		}
	}

	// Everything is handled: a marker published now comes after any dead
	// letter of these messages.
	for _, topic := range []string{strictDLQ, skippingDLQ} {
		if err := pub.Publish(topic, message.NewMessage("marker", nil)); err != nil {
			t.Fatal(err)
		}
	}
	dead := kototest.Receive(t, strictDead, "the strict consumer's dead letter")
	reason := dead.Metadata.Get("dead_letter_reason")
	if dead.Metadata.Get(koto.TypeNameMetadataKey) != "order-placed" ||
		!strings.Contains(reason, `"order-placed"`) || !strings.Contains(reason, `"stock-reserved"`) {
		t.Errorf("strict consumer's first dead letter %s (%v), want order-placed with a reason naming both types", dead.UUID, dead.Metadata)
	}
	if got := kototest.Receive(t, skippingDead, "the skipping consumer's marker"); got.UUID != "marker" {
		t.Errorf("skipping consumer dead-lettered %s (%v), want nothing", got.UUID, got.Metadata)
	}
}
