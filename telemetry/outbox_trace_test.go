package telemetry_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/topics"
)

// TestOutboxKeepsTheTrace: an event written to the outbox in a transaction
// through a cqrs publisher carries its producer span's trace context in
// its row; forwarded to Kafka, its consumer span is that span's child, in
// the trace of the code that wrote it.
func TestOutboxKeepsTheTrace(t *testing.T) {
	s := newSDK(t)
	pool := pgtest.Pool(t)
	schema := pgtest.Name("telemetry_outbox")
	t.Cleanup(func() { pgtest.DropSchema(t, pool, schema) })
	brokers := broker.Config{Brokers: kototest.Brokers(t)}
	ctx := kototest.Context(t)

	box, err := outbox.New(pool, outbox.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Setup(ctx); err != nil {
		t.Fatalf("outbox setup: %v", err)
	}
	fwd, err := outbox.NewForwarder(box, outbox.ForwarderConfig{Broker: brokers, Logger: kototest.Logger(slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- fwd.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		<-ran
		_ = fwd.Close()
	})

	orders, payments := kototest.ServiceName(t, "orders"), kototest.ServiceName(t, "payments")
	consumed := make(chan struct{}, 1)
	router := kototest.NewRouter(t, nil)
	svc, err := cqrs.NewService(cqrs.ServiceConfig{Name: payments, Broker: brokers, AutoProvisionTopics: true,
		Logger: slog.New(slog.DiscardHandler), Telemetry: s.tel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(kototest.Context(t)) })
	if err := svc.Register(ctx, router, cqrs.NewEventConsumer(func(ctx context.Context, ev *OrderPlaced) error {
		consumed <- struct{}{}
		return nil
	}, cqrs.From(orders))); err != nil {
		t.Fatal(err)
	}
	kototest.RunRouter(t, router)

	events, err := cqrs.NewEventPublisher(box.ContextPublisher(), cqrs.EventPublisherConfig{Service: orders, Telemetry: s.tel})
	if err != nil {
		t.Fatal(err)
	}
	const cid = "checkout-7"
	txCtx, checkout := s.tracer.Start(correlation.WithID(ctx, cid), "checkout")
	err = box.Transact(txCtx, func(ctx context.Context, tx pgx.Tx) error {
		return events.Publish(ctx, OrderPlaced{OrderID: "7"})
	})
	checkout.End()
	if err != nil {
		t.Fatalf("transaction: %v", err)
	}
	select {
	case <-consumed:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the event did not come through the outbox: %s", outboxState(pool, box))
	}

	topic := topics.Event(orders, "order-placed")
	spans := s.waitForSpans(t, func(spans []sdktrace.ReadOnlySpan) bool { return len(named(spans, "process "+topic)) == 1 })
	send, process := named(spans, "send "+topic), named(spans, "process "+topic)[0]
	switch {
	case len(send) != 1:
		t.Fatalf("want one send span (the outbox write):\n%s", describe(spans))
	case send[0].Parent().SpanID() != checkout.SpanContext().SpanID():
		t.Errorf("the outbox write's send span is not the checkout's child:\n%s", describe(spans))
	case process.Parent().SpanID() != send[0].SpanContext().SpanID() || process.SpanContext().TraceID() != checkout.SpanContext().TraceID():
		t.Errorf("the consumer span is not the child of the outbox write's send span:\n%s", describe(spans))
	}
	if got := attr(process, semconv.MessagingMessageConversationIDKey); got != cid {
		t.Errorf("consumer span's correlation ID %q, want %q", got, cid)
	}
}

// outboxState says how many rows wait in box, and how old the oldest open
// transaction of the cluster is: the forwarder forwards no row committed
// after it began (its visibility guard, pg_snapshot_xmin, is cluster-wide),
// so another client's long transaction on a shared server holds it back.
func outboxState(pool *pgxpool.Pool, box *outbox.Outbox) string {
	ctx := context.Background()
	var waiting int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+box.Table()).Scan(&waiting); err != nil {
		return err.Error()
	}
	var oldest, app string
	err := pool.QueryRow(ctx, `SELECT (now() - xact_start)::text, application_name FROM pg_stat_activity
		WHERE backend_xid IS NOT NULL OR backend_xmin IS NOT NULL ORDER BY xact_start LIMIT 1`).Scan(&oldest, &app)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d rows wait in %s; the oldest open transaction of the cluster began %s ago (application %q)", waiting, box.Table(), oldest, app)
}
