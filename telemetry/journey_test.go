package telemetry_test

import (
	"context"
	"log/slog"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

type OrderPlaced struct{ OrderID string }
type PaymentProcessed struct{ OrderID string }
type ReserveStock struct{ SKU string }
type StockReserved struct{ ReservationID string }

// shop is three cqrs services on a real broker, traced by one SDK
// Telemetry: orders asks inventory for stock by request/reply and
// publishes OrderPlaced; payments consumes it and publishes
// PaymentProcessed; orders consumes that and reports on paid.
type shop struct {
	orders, inventory, payments string // service names
	commands                    *cqrs.CommandDispatcher
	events                      *cqrs.EventPublisher
	paid                        chan string // correlation IDs of paid orders
}

func newShop(t *testing.T, s *sdk) *shop {
	t.Helper()
	brokers := kototest.Brokers(t)
	sh := &shop{orders: kototest.ServiceName(t, "orders"), inventory: kototest.ServiceName(t, "inventory"),
		payments: kototest.ServiceName(t, "payments"), paid: make(chan string, 1)}
	pub := kototest.NewPublisher(t, broker.Config{Brokers: brokers})
	payments, err := cqrs.NewEventPublisher(pub, cqrs.EventPublisherConfig{Service: sh.payments, Telemetry: s.tel})
	if err != nil {
		t.Fatal(err)
	}
	router := kototest.NewRouter(t, nil)
	register := func(name string, c cqrs.Consumer) {
		svc, err := cqrs.NewService(cqrs.ServiceConfig{Name: name, Broker: broker.Config{Brokers: brokers}, Publisher: pub,
			AutoProvisionTopics: true, Logger: slog.New(slog.DiscardHandler), Telemetry: s.tel})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = svc.Close(kototest.Context(t)) })
		if err := svc.Register(kototest.Context(t), router, c); err != nil {
			t.Fatalf("register %s: %v", name, err)
		}
	}
	register(sh.inventory, cqrs.NewCommandConsumerWithResult(func(ctx context.Context, cmd *ReserveStock) (StockReserved, error) {
		return StockReserved{ReservationID: "r-" + cmd.SKU}, nil
	}))
	register(sh.payments, cqrs.NewEventConsumer(func(ctx context.Context, ev *OrderPlaced) error {
		return payments.Publish(ctx, PaymentProcessed(*ev))
	}, cqrs.From(sh.orders)))
	register(sh.orders, cqrs.NewEventConsumer(func(ctx context.Context, ev *PaymentProcessed) error {
		sh.paid <- correlation.FromContext(ctx)
		return nil
	}, cqrs.From(sh.payments)))
	kototest.RunRouter(t, router)

	if sh.events, err = cqrs.NewEventPublisher(pub, cqrs.EventPublisherConfig{Service: sh.orders, Telemetry: s.tel}); err != nil {
		t.Fatal(err)
	}
	sh.commands, err = cqrs.NewCommandDispatcher(pub, cqrs.CommandDispatcherConfig{
		Service:             sh.orders,
		Routes:              []cqrs.Route{cqrs.RouteOf[ReserveStock](topics.Command(sh.inventory, "reserve-stock"))},
		Broker:              broker.Config{Brokers: brokers},
		AutoProvisionTopics: true,
		Logger:              slog.New(slog.DiscardHandler),
		Telemetry:           s.tel,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.commands.Start(kototest.Context(t)); err != nil {
		t.Fatalf("dispatcher start: %v", err)
	}
	t.Cleanup(func() { _ = sh.commands.Close() })
	return sh
}

// TestOrderJourneyIsOneTrace: a checkout asks for stock by request/reply
// and publishes OrderPlaced; payments consumes it and publishes
// PaymentProcessed, which orders consumes. Every span of it is in the
// checkout's trace, each a child of the span that caused it, and carries
// the checkout's correlation ID.
func TestOrderJourneyIsOneTrace(t *testing.T) {
	s := newSDK(t)
	sh := newShop(t, s)
	const cid = "checkout-42"
	ctx := correlation.WithID(kototest.Context(t), cid)
	ctx, checkout := s.tracer.Start(ctx, "checkout")
	if _, err := cqrs.Request[StockReserved](ctx, sh.commands, ReserveStock{SKU: "sku-1"}); err != nil {
		t.Fatalf("request: %v", err)
	}
	if err := sh.events.Publish(ctx, OrderPlaced{OrderID: "42"}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	checkout.End()
	select {
	case got := <-sh.paid:
		if got != cid {
			t.Errorf("paid with correlation ID %q, want %q", got, cid)
		}
	case <-ctx.Done():
		t.Fatal("the order was not paid")
	}

	command, replies := topics.Command(sh.inventory, "reserve-stock"), cqrs.ReplyTopic(sh.orders)
	placed, paid := topics.Event(sh.orders, "order-placed"), topics.Event(sh.payments, "payment-processed")
	// Each span and its parent.
	want := map[string]string{
		"request " + command: "checkout",
		"send " + command:    "request " + command,
		"process " + command: "send " + command,
		"send " + replies:    "process " + command,
		"send " + placed:     "checkout",
		"process " + placed:  "send " + placed,
		"send " + paid:       "process " + placed,
		"process " + paid:    "send " + paid,
	}
	spans := s.waitForSpans(t, func(spans []sdktrace.ReadOnlySpan) bool {
		return len(spans) >= len(want)+1
	})
	byID := map[[8]byte]sdktrace.ReadOnlySpan{}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		byID[sp.SpanContext().SpanID()] = sp
		if _, dup := byName[sp.Name()]; dup {
			t.Errorf("two spans named %q", sp.Name())
		}
		byName[sp.Name()] = sp
	}
	if len(spans) != len(want)+1 {
		t.Errorf("%d spans, want %d:\n%s", len(spans), len(want)+1, describe(spans))
	}
	trace := checkout.SpanContext().TraceID()
	for name, parent := range want {
		sp, ok := byName[name]
		switch {
		case !ok:
			t.Errorf("no span %q", name)
			continue
		case sp.SpanContext().TraceID() != trace:
			t.Errorf("%s: in trace %s, want the checkout's %s", name, sp.SpanContext().TraceID(), trace)
		case byID[sp.Parent().SpanID()] == nil || byID[sp.Parent().SpanID()].Name() != parent:
			t.Errorf("%s: parent is not %s", name, parent)
		}
		if got := attr(sp, semconv.MessagingMessageConversationIDKey); got != cid {
			t.Errorf("%s: correlation ID %q, want %q", name, got, cid)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("spans:\n%s", describe(spans))
	}
	req, reply := byName["request "+command], byName["send "+replies]
	if req != nil && reply != nil {
		if links := req.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != reply.SpanContext().SpanID() {
			t.Errorf("the request span does not link to the reply's send span: %v", links)
		}
		if got := attr(req, attrRequestOutcome); got != "ok" {
			t.Errorf("request outcome %q, want ok", got)
		}
	}
	if got := s.count(t, metricRequestDuration, semconv.MessagingDestinationName(command),
		attrRequestOutcome.String("ok")); got != 1 {
		t.Errorf("request durations: %d, want 1", got)
	}
}
