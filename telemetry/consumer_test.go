package telemetry_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// consumerEnv is a topic on a real broker, consumed by one router handler
// behind middleware.Defaults with an SDK Telemetry.
type consumerEnv struct {
	sdk     *sdk
	brokers []string
	pub     message.Publisher // decorated
	topic   string
	group   string
	chain   *middleware.Chain
}

func newConsumerEnv(t *testing.T) *consumerEnv {
	t.Helper()
	e := &consumerEnv{sdk: newSDK(t), brokers: kototest.Brokers(t),
		topic: kototest.Topic(t, "orders"), group: kototest.Group(t, "payments")}
	raw := kototest.NewPublisher(t, broker.Config{Brokers: e.brokers})
	e.pub = e.sdk.tel.Publisher(raw)
	kototest.Provision(t, broker.Config{Brokers: e.brokers}, e.topic, topics.DeadLetter(e.group))
	store := idempotency.NewMemoryStore(0)
	t.Cleanup(func() { _ = store.Close() })
	var err error
	e.chain, err = middleware.Defaults(middleware.Config{
		Publisher: raw, // Defaults decorates it for the dead letters
		Store:     store,
		Logger:    slog.New(slog.DiscardHandler),
		Telemetry: e.sdk.tel,
		DeadLetter: middleware.DeadLetterConfig{MaxAttempts: 3,
			Backoff: koto.Backoff{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond}},
	})
	if err != nil {
		t.Fatalf("Defaults: %v", err)
	}
	t.Cleanup(func() { _ = e.chain.Close(context.Background()) })
	return e
}

// run consumes the topic with handle until the test ends.
func (e *consumerEnv) run(t *testing.T, handle message.NoPublishHandlerFunc) {
	t.Helper()
	router := kototest.NewRouter(t, nil)
	sub := kototest.NewSubscriber(t, broker.Config{Brokers: e.brokers, ConsumerGroup: e.group})
	router.AddConsumerHandler(e.group, e.topic, sub, handle).AddMiddleware(e.chain.Middlewares()...)
	kototest.RunRouter(t, router)
}

// newMessage returns a message with payload, on one partition key so that
// the test's messages are consumed in order, under correlation ID cid.
func newMessage(uuid, payload, cid string) *message.Message {
	msg := message.NewMessage(uuid, []byte(payload))
	msg.Metadata.Set(koto.PartitionKeyMetadataKey, "one-key")
	msg.Metadata.Set(correlation.MetadataKey, cid)
	return msg
}

// TestConsumerOutcomes runs the outcomes of middleware.Logging through a
// real broker and checks that each reaches the metrics and the spans once:
// ok, duplicate, a retry then ok, dead-lettered.
func TestConsumerOutcomes(t *testing.T) {
	e := newConsumerEnv(t)
	var mu sync.Mutex
	calls := map[string]int{}
	e.run(t, func(msg *message.Message) error {
		mu.Lock()
		calls[string(msg.Payload)]++
		n := calls[string(msg.Payload)]
		mu.Unlock()
		switch string(msg.Payload) {
		case "flaky":
			if n == 1 {
				return errors.New("flaky: try again")
			}
		case "poison":
			return koto.Poison(errors.New("cannot decode"))
		}
		return nil
	})
	okID := watermill.NewUUID()
	for _, msg := range []*message.Message{
		newMessage(okID, "ok", "c-ok"),
		newMessage(okID, "ok", "c-dup"), // the same UUID: a duplicate
		newMessage(watermill.NewUUID(), "flaky", "c-flaky"),
		newMessage(watermill.NewUUID(), "poison", "c-poison"),
	} {
		if err := e.pub.Publish(e.topic, msg); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	consumed := func(kv ...attribute.KeyValue) int64 {
		return e.sdk.count(t, "messaging.client.consumed.messages", append(kv, semconv.MessagingConsumerGroupName(e.group))...)
	}
	kototest.WaitFor(t, "4 deliveries recorded", func() bool { return consumed() == 4 })

	for outcome, want := range map[string]int64{"ok": 2, "duplicate": 1, "dead-lettered": 1, "nacked": 0} {
		if got := consumed(attrOutcome.String(outcome), semconv.MessagingDestinationName(e.topic)); got != want {
			t.Errorf("consumed messages with outcome %s: %d, want %d", outcome, got, want)
		}
	}
	if got := e.sdk.count(t, "messaging.process.duration", semconv.MessagingConsumerGroupName(e.group)); got != 4 {
		t.Errorf("process durations recorded: %d, want 4", got)
	}
	if got := e.sdk.count(t, metricConsumerRetries, attrErrorClass.String("retryable")); got != 1 {
		t.Errorf("retries: %d, want 1", got)
	}
	if got := e.sdk.count(t, metricConsumerDeadLetters, attrErrorClass.String("poison"),
		semconv.ErrorTypeKey.String("*errors.errorString")); got != 1 {
		t.Errorf("dead letters: %d, want 1", got)
	}
	// Checks: ok, its duplicate, flaky twice (each attempt checks again), poison.
	if got := e.sdk.count(t, metricStoreDuration, attrStoreOperation.String("check")); got != 5 {
		t.Errorf("store checks: %d, want 5", got)
	}
	if got := e.sdk.count(t, metricStoreDuration, attrStoreOperation.String("mark")); got != 2 {
		t.Errorf("store marks: %d, want 2", got)
	}
	// Four sends by the test, one per delivery and the dead letter's.
	if got := e.sdk.count(t, "messaging.client.sent.messages", semconv.MessagingDestinationName(e.topic)); got != 4 {
		t.Errorf("sent messages: %d, want 4", got)
	}

	spans := e.sdk.waitForSpans(t, func(s []sdktrace.ReadOnlySpan) bool {
		return len(named(s, "process "+e.topic)) == 4 && len(named(s, "send "+topics.DeadLetter(e.group))) == 1
	})
	checkConsumerSpans(t, e, spans)
}

// checkConsumerSpans checks that each process span is the child of the
// send span of its message, carries its correlation ID and outcome, and
// that the dead letter's send span is the child of the failed delivery's.
func checkConsumerSpans(t *testing.T, e *consumerEnv, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	sends := map[string]sdktrace.ReadOnlySpan{} // by correlation ID
	for _, s := range named(spans, "send "+e.topic) {
		sends[attr(s, semconv.MessagingMessageConversationIDKey)] = s
	}
	wantOutcome := map[string]string{"c-ok": "ok", "c-dup": "duplicate", "c-flaky": "ok", "c-poison": "dead-lettered"}
	var poison sdktrace.ReadOnlySpan
	for _, p := range named(spans, "process "+e.topic) {
		cid := attr(p, semconv.MessagingMessageConversationIDKey)
		send, ok := sends[cid]
		switch {
		case !ok:
			t.Errorf("process span with correlation ID %q has no send span with it", cid)
			continue
		case p.Parent().SpanID() != send.SpanContext().SpanID() || p.SpanContext().TraceID() != send.SpanContext().TraceID():
			t.Errorf("%s: process span is not the child of its send span:\n%s", cid, describe(spans))
		}
		if got := attr(p, attrOutcome); got != wantOutcome[cid] {
			t.Errorf("%s: outcome %q, want %q", cid, got, wantOutcome[cid])
		}
		if got := attr(p, semconv.MessagingConsumerGroupNameKey); got != e.group {
			t.Errorf("%s: consumer group %q, want %q", cid, got, e.group)
		}
		retries := 0
		for _, ev := range p.Events() {
			if ev.Name == "retry" {
				retries++
			}
		}
		if want := map[bool]int{true: 1}[cid == "c-flaky"]; retries != want {
			t.Errorf("%s: %d retry events, want %d", cid, retries, want)
		}
		if cid == "c-poison" {
			poison = p
			if p.Status().Code != codes.Error {
				t.Errorf("dead-lettered delivery: span status %v, want Error", p.Status())
			}
		}
	}
	dl := named(spans, "send "+topics.DeadLetter(e.group))[0]
	if poison == nil || dl.Parent().SpanID() != poison.SpanContext().SpanID() {
		t.Errorf("the dead letter's send span is not the child of the failed delivery's:\n%s", describe(spans))
	}
	if got := attr(dl, semconv.MessagingMessageConversationIDKey); got != "c-poison" {
		t.Errorf("dead letter's correlation ID %q, want c-poison", got)
	}
}

// TestNackedDelivery: an outage that outlives the message's context is
// nacked, and recorded as such with its error type.
func TestNackedDelivery(t *testing.T) {
	e := newConsumerEnv(t)
	h := message.HandlerFunc(func(*message.Message) ([]*message.Message, error) {
		return nil, koto.Outage(errors.New("database down"))
	})
	mws := e.chain.Middlewares()
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	msg := newMessage(watermill.NewUUID(), "x", "c-nack")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the router is closing: no retry waits
	msg.SetContext(ctx)
	_, err := h(msg)
	if err == nil {
		t.Fatal("the chain returned no error for an outage")
	}
	errorType := semconv.ErrorType(err).Value.AsString() // the Go type of the error the chain returned
	if got := e.sdk.count(t, "messaging.client.consumed.messages", attrOutcome.String("nacked"),
		semconv.ErrorTypeKey.String(errorType)); got != 1 {
		t.Errorf("nacked deliveries with error.type %s: %d, want 1", errorType, got)
	}
	spans := named(e.sdk.spans.Ended(), "process ")
	if len(spans) != 1 || spans[0].Status().Code != codes.Error || attr(spans[0], attrOutcome) != "nacked" {
		t.Fatalf("want one process span, nacked with status Error:\n%s", describe(e.sdk.spans.Ended()))
	}
}

// TestReturnedMessagesContinueTheTrace: the messages a handler returns,
// which the router publishes, continue the delivery's trace, whether the
// router's publisher is decorated (a send span, child of the delivery's)
// or not (the delivery's trace context in their metadata).
func TestReturnedMessagesContinueTheTrace(t *testing.T) {
	for _, decorated := range []bool{true, false} {
		t.Run(map[bool]string{true: "decorated publisher", false: "plain publisher"}[decorated], func(t *testing.T) {
			e := newConsumerEnv(t)
			out := kototest.Topic(t, "out")
			kototest.Provision(t, broker.Config{Brokers: e.brokers}, out)
			raw := kototest.NewPublisher(t, broker.Config{Brokers: e.brokers})
			var routerPub message.Publisher = raw // the router closes it too
			if decorated {
				routerPub = e.sdk.tel.Publisher(raw)
			}
			router := kototest.NewRouter(t, nil)
			sub := func(group string) message.Subscriber {
				return kototest.NewSubscriber(t, broker.Config{Brokers: e.brokers, ConsumerGroup: group})
			}
			router.AddHandler(e.group, e.topic, sub(e.group), out, routerPub, func(msg *message.Message) ([]*message.Message, error) {
				return []*message.Message{message.NewMessage(watermill.NewUUID(), []byte("next"))}, nil
			}).AddMiddleware(e.chain.Middlewares()...)
			next := kototest.Group(t, "next")
			router.AddConsumerHandler(next, out, sub(next), func(*message.Message) error { return nil }).
				AddMiddleware(e.sdk.tel.Middleware)
			kototest.RunRouter(t, router)
			if err := e.pub.Publish(e.topic, newMessage(watermill.NewUUID(), "first", "c-first")); err != nil {
				t.Fatal(err)
			}

			spans := e.sdk.waitForSpans(t, func(s []sdktrace.ReadOnlySpan) bool { return len(named(s, "process "+out)) == 1 })
			first, second := named(spans, "process "+e.topic), named(spans, "process "+out)[0]
			if len(first) != 1 {
				t.Fatalf("want one delivery of the first message:\n%s", describe(spans))
			}
			parent := first[0]
			if decorated {
				sends := named(spans, "send "+out)
				if len(sends) != 1 || sends[0].Parent().SpanID() != first[0].SpanContext().SpanID() {
					t.Fatalf("want one send span of the returned message, child of the delivery's:\n%s", describe(spans))
				}
				parent = sends[0]
			}
			if second.Parent().SpanID() != parent.SpanContext().SpanID() || second.SpanContext().TraceID() != parent.SpanContext().TraceID() {
				t.Errorf("the returned message's delivery is not the child of %s:\n%s", parent.Name(), describe(spans))
			}
			if got := attr(second, semconv.MessagingMessageConversationIDKey); got != "c-first" {
				t.Errorf("the returned message's correlation ID %q, want c-first", got)
			}
		})
	}
}
