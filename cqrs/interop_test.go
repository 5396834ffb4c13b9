package cqrs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/cloudevents/sdk-go/protocol/kafka_sarama/v2"
	ce "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/extensions"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/telemetry"
	"github.com/koto-dev/watermill-koto/topics"
)

// ParcelShipped is the event of the CloudEvents tests.
type ParcelShipped struct {
	ParcelID string `json:"parcelId"`
}

// ceTypes gives the CloudEvents types of the tests reverse-DNS names.
var ceTypes = broker.TypeNames{Prefix: "com.example.shop."}

func cloudEventsMarshaler(t *testing.T, source string) kafka.MarshalerUnmarshaler {
	t.Helper()
	m, err := broker.NewCloudEventsMarshaler(broker.CloudEventsConfig{Source: source, Types: ceTypes})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sdkSaramaConfig is the sarama configuration of the CloudEvents SDK's
// clients in the tests.
func sdkSaramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Return.Successes = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	return cfg
}

// recordedTelemetry returns telemetry that records its spans and
// propagates W3C trace context.
func recordedTelemetry(t *testing.T) (*telemetry.Telemetry, *tracetest.SpanRecorder) {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp, Propagator: propagation.TraceContext{}})
	if err != nil {
		t.Fatal(err)
	}
	return tel, spans
}

// handledEvent is what a consumer saw of one event.
type handledEvent struct {
	id, correlation string
	trace           trace.SpanContext
	event           ParcelShipped
}

// TestCloudEventsFromSDK sends events with the CloudEvents SDK's Kafka
// sender to a cqrs consumer with the CloudEvents mapping: an event sent
// twice with one ce_id is handled once, with its correlation extension in
// the handler's context and its trace as the parent of the consumer span;
// a structured-mode event is handled too; a record without ce_id is
// dead-lettered with the reason.
func TestCloudEventsFromSDK(t *testing.T) {
	brokers := kototest.Brokers(t)
	shop, shipping := kototest.ServiceName(t, "shop"), kototest.ServiceName(t, "shipping")
	topic := topics.Event(shop, "parcel-shipped")
	tel, spans := recordedTelemetry(t)
	svc := newService(t, brokers, cqrs.ServiceConfig{
		Name: shipping, AutoProvisionTopics: true, Telemetry: tel,
		Broker: broker.Config{Marshaler: cloudEventsMarshaler(t, "/"+shipping)},
	})
	handled := make(chan handledEvent, 16)
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err := svc.Register(kototest.Context(t), r, cqrs.NewEventConsumer(func(ctx context.Context, ev *ParcelShipped) error {
		handled <- handledEvent{id: ev.ParcelID, correlation: correlation.FromContext(ctx), trace: trace.SpanContextFromContext(ctx), event: *ev}
		return nil
	}, cqrs.From(shop)))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	dlq := deadLetters(t, brokers, topics.DeadLetter(topics.ConsumerGroup(shipping, "parcel-shipped")))
	kototest.RunRouter(t, r)

	sender, err := kafka_sarama.NewSender(brokers, sdkSaramaConfig(), topic)
	if err != nil {
		t.Fatalf("CloudEvents SDK sender: %v", err)
	}
	defer sender.Close(context.Background())
	client, err := ce.NewClient(sender, ce.WithTimeNow())
	if err != nil {
		t.Fatalf("CloudEvents SDK client: %v", err)
	}
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, TraceFlags: trace.FlagsSampled,
	})
	send := func(ctx context.Context, id, parcel string) {
		t.Helper()
		ev := ce.NewEvent()
		ev.SetID(id)
		ev.SetSource("/" + shop)
		ev.SetType("com.example.shop.parcel-shipped")
		ev.SetExtension("correlationid", "corr-"+parcel)
		ev.SetExtension("partitionkey", "parcels") // one partition: in order
		extensions.DistributedTracingExtension{
			TraceParent: fmt.Sprintf("00-%s-%s-01", parent.TraceID(), parent.SpanID()), TraceState: "shop=1",
		}.AddTracingAttributes(&ev)
		if err := ev.SetData(ce.ApplicationJSON, ParcelShipped{ParcelID: parcel}); err != nil {
			t.Fatal(err)
		}
		if res := client.Send(ctx, ev); !ce.IsACK(res) {
			t.Fatalf("SDK send of %s: %v", id, res)
		}
	}
	ctx := kototest.Context(t)
	send(ctx, "ev-1", "p-1")
	send(ctx, "ev-1", "p-1") // the same event again
	send(binding.WithForceStructured(ctx), "ev-2", "p-2")

	got := map[string]handledEvent{}
	for len(got) < 2 { // ev-2, sent last, comes last
		h := kototest.Receive(t, handled, "an event sent by the SDK")
		if _, dup := got[h.id]; dup {
			t.Fatalf("event %s handled twice; one ce_id must be handled once", h.id)
		}
		got[h.id] = h
	}
	for _, parcel := range []string{"p-1", "p-2"} {
		h := got[parcel]
		if h.correlation != "corr-"+parcel || h.trace.TraceID() != parent.TraceID() {
			t.Errorf("%s handled with correlation %q and trace %s, want corr-%s and the sent trace %s",
				parcel, h.correlation, h.trace.TraceID(), parcel, parent.TraceID())
		}
	}
	kototest.WaitFor(t, "consumer spans that are children of the sent span", func() bool {
		n := 0
		for _, s := range spans.Ended() {
			if s.SpanKind() == trace.SpanKindConsumer && s.Parent().SpanID() == parent.SpanID() && s.Parent().IsRemote() {
				n++
			}
		}
		return n >= 2
	})

	produceRecord(t, brokers, topic, "p-3", `{"parcelId":"p-3"}`,
		"ce_specversion", "1.0", "ce_source", "/"+shop, "ce_type", "com.example.shop.parcel-shipped")
	dead := kototest.Receive(t, dlq, "the dead letter of a record without ce_id")
	if reason := dead.Metadata.Get("dead_letter_reason"); !strings.Contains(reason, "missing or empty: id") {
		t.Errorf("dead letter reason %q, want the missing ce_id named", reason)
	}
	if string(dead.Payload) != `{"parcelId":"p-3"}` || dead.Metadata.Get("ce_type") != "com.example.shop.parcel-shipped" {
		t.Errorf("dead letter %q with %v, want the record's value and headers", dead.Payload, dead.Metadata)
	}
	select {
	case h := <-handled:
		t.Errorf("the record without ce_id reached the handler: %+v", h)
	default:
	}
}

// TestCloudEventsToSDK publishes an event with cqrs and the CloudEvents
// mapping and receives it with the CloudEvents SDK's Kafka receiver: a
// valid CloudEvent with the expected attributes.
func TestCloudEventsToSDK(t *testing.T) {
	brokers := kototest.Brokers(t)
	shop := kototest.ServiceName(t, "shop")
	topic := topics.Event(shop, "parcel-shipped")
	kototest.Provision(t, broker.Config{Brokers: brokers}, topic)
	tel, _ := recordedTelemetry(t)
	pub := kototest.NewPublisher(t, broker.Config{Brokers: brokers, Marshaler: cloudEventsMarshaler(t, "/"+shop)})
	events, err := cqrs.NewEventPublisher(pub, cqrs.EventPublisherConfig{Service: shop, Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := sdktrace.NewTracerProvider().Tracer("test").Start(correlation.WithID(kototest.Context(t), "corr-7"), "checkout")
	defer span.End()
	if err := events.Publish(ctx, ParcelShipped{ParcelID: "p-7"}); err != nil {
		t.Fatalf("Publish: %v", err)
	}

	msg := receiveWithSDK(t, brokers, topic)
	ev, err := binding.ToEvent(ctx, msg)
	if err != nil {
		t.Fatalf("the SDK cannot read the record as a CloudEvent: %v", err)
	}
	if err := ev.Validate(); err != nil {
		t.Fatalf("received event is not a valid CloudEvent: %v\n%s", err, ev)
	}
	var data ParcelShipped
	if err := ev.DataAs(&data); err != nil || data.ParcelID != "p-7" {
		t.Errorf("data %s (%v), want the event", ev.Data(), err)
	}
	tracing, _ := extensions.GetDistributedTracingExtension(*ev)
	wantParent := fmt.Sprintf("00-%s-", span.SpanContext().TraceID())
	if ev.SpecVersion() != "1.0" || ev.Type() != "com.example.shop.parcel-shipped" || ev.Source() != "/"+shop ||
		ev.DataContentType() != "application/json" || ev.Time().IsZero() || ev.ID() == "" ||
		ev.Extensions()["correlationid"] != "corr-7" || !strings.HasPrefix(tracing.TraceParent, wantParent) {
		t.Errorf("received event:\n%s\nwant type com.example.shop.parcel-shipped, source /%s, JSON, a time and an ID, correlationid corr-7, a traceparent in trace %s",
			ev, shop, span.SpanContext().TraceID())
	}
}

// receiveWithSDK reads the first record of topic with the CloudEvents SDK's
// Kafka receiver in a consumer group of its own.
func receiveWithSDK(t *testing.T, brokers []string, topic string) binding.Message {
	t.Helper()
	group, err := sarama.NewConsumerGroup(brokers, kototest.Group(t, "sdk"), sdkSaramaConfig())
	if err != nil {
		t.Fatalf("consumer group: %v", err)
	}
	receiver := kafka_sarama.NewReceiver()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil && group.Consume(ctx, []string{topic}, receiver) == nil {
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = group.Close()
	})
	msg, err := receiver.Receive(kototest.Context(t))
	if err != nil {
		t.Fatalf("SDK receive: %v", err)
	}
	t.Cleanup(func() { _ = msg.Finish(nil) })
	return msg
}

// produceRecord produces one record with the given key, value and headers
// (key, value pairs), as a producer outside this library would.
func produceRecord(t *testing.T, brokers []string, topic, key, value string, headers ...string) {
	t.Helper()
	producer, err := sarama.NewSyncProducer(brokers, sdkSaramaConfig())
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	defer producer.Close()
	rec := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(value)}
	for i := 0; i+1 < len(headers); i += 2 {
		rec.Headers = append(rec.Headers, sarama.RecordHeader{Key: []byte(headers[i]), Value: []byte(headers[i+1])})
	}
	if _, _, err := producer.SendMessage(rec); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// PaymentCaptured is a .NET contract as Wolverine's default serializer
// writes it: System.Text.Json with Wolverine's options, camelCase names.
type PaymentCaptured struct {
	PaymentID string  `json:"paymentId"`
	Amount    float64 `json:"amount"`
}

// TestWolverineEnvelopeDeduplicatedLikeDotnet delivers an envelope as
// Wolverine writes it twice (a redelivery) to a consumer with the Wolverine
// mapping, the PostgreSQL store and the empty idempotency scope: it is
// handled once, by its id, and the row stored for it is the row a .NET
// Koto consumer stores, message_id = the envelope's Guid.
func TestWolverineEnvelopeDeduplicatedLikeDotnet(t *testing.T) {
	brokers := kototest.Brokers(t)
	store, pool, schema := newPostgresStore(t)
	payments, ledger := kototest.ServiceName(t, "payments"), kototest.ServiceName(t, "ledger")
	topic := topics.Event(payments, "payment-captured")
	wolverine, err := broker.NewWolverineMarshaler(broker.WolverineConfig{Source: ledger, Types: broker.TypeNames{
		Names: map[string]string{"payment-captured": "Shop.Contracts.PaymentCaptured"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	svc := newService(t, brokers, cqrs.ServiceConfig{
		Name: ledger, AutoProvisionTopics: true, Store: store, Broker: broker.Config{Marshaler: wolverine},
	})
	type seen struct {
		ev          PaymentCaptured
		correlation string
	}
	handled := make(chan seen, 16)
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err = svc.Register(kototest.Context(t), r, cqrs.NewEventConsumer(func(ctx context.Context, ev *PaymentCaptured) error {
		handled <- seen{*ev, correlation.FromContext(ctx)}
		return nil
	}, cqrs.From(payments), cqrs.IdempotencyScope("")))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	kototest.RunRouter(t, r)

	envelope := func(id, payment string) {
		body, _ := json.Marshal(PaymentCaptured{PaymentID: payment, Amount: 42.5})
		produceRecord(t, brokers, topic, "account-1", string(body), // one partition: in order
			"correlation-id", "corr-"+payment, "id", id, "conversation-id", "9e8d7c6b-5a49-4838-a726-150f4e3d2c1b",
			"content-type", "application/json", "source", "payments-api", "sent-at", "2026-03-04 05:06:07:123456 Z",
			"message-type", "Shop.Contracts.PaymentCaptured", "attempts", "0")
	}
	const first, second = "5b1c3e1a-2f4d-4c6e-9a8b-7d6e5f4a3b2c", "7c2d4f2b-3a5e-4d7f-8b9c-0e1f2a3b4c5d"
	envelope(first, "pay-1")
	envelope(first, "pay-1") // redelivered
	envelope(second, "pay-2")
	for _, want := range []string{"pay-1", "pay-2"} {
		got := kototest.Receive(t, handled, "envelope "+want)
		if got.ev.PaymentID != want || got.ev.Amount != 42.5 || got.correlation != "corr-"+want {
			t.Fatalf("handled %+v, want payment %s of 42.5 with correlation corr-%s, once", got, want, want)
		}
	}

	kototest.WaitFor(t, "the marks of both envelopes", func() bool { return len(processedIDs(t, pool, schema)) == 2 })
	if got, want := processedIDs(t, pool, schema), []string{first, second}; !slices.Equal(got, want) {
		t.Errorf("processed_messages.message_id = %v, want the envelope ids %v, as a .NET Koto consumer stores them", got, want)
	}
}

// processedIDs returns the message_id column of the processed-messages table
// in schema, sorted.
func processedIDs(t *testing.T, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, schema string) []string {
	t.Helper()
	rows, err := pool.Query(kototest.Context(t), "SELECT message_id::text FROM "+pgx.Identifier{schema, "processed_messages"}.Sanitize()+" ORDER BY 1")
	if err != nil {
		t.Fatalf("read processed_messages: %v", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("read processed_messages: %v", err)
	}
	return ids
}
