package middleware_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// TestReturnedMessagesSurviveAFailedPublish: a handler behind Defaults
// returns a message, and the router's first publish of it fails, so the
// router nacks the input. The redelivery is not skipped as a duplicate: the
// handler runs again and its message is delivered. Once the input is acked
// it is marked: a re-publication of it is a duplicate.
func TestReturnedMessagesSurviveAFailedPublish(t *testing.T) {
	env := newKafkaEnv(t)
	in, out := env.topic(t, "orders"), env.topic(t, "receipts")
	order := newMessages(1)[0]
	env.publish(t, in, order)

	handled := new(kototest.Counter)
	produce := func(msg *message.Message) ([]*message.Message, error) {
		handled.Add(msg.UUID)
		return []*message.Message{message.NewMessage(watermill.NewUUID(), []byte(msg.UUID))}, nil
	}
	pub := &kototest.FlakyPublisher{Publisher: kototest.NewPublisher(t, broker.Config{Brokers: env.brokers})}
	pub.FailFor(1)
	var duplicates atomic.Int64
	env.runRouter(t, handlerSpec{
		name: kototest.Group(t, "billing"), topic: in,
		middlewares: defaults(t, env.pub, memoryStore(t), &duplicates),
		produce:     produce, publishTopic: out, publisher: pub,
	})

	receipts := env.collect(t, out, 1)
	if string(receipts[0].Payload) != order.UUID {
		t.Fatalf("receipt for %q, want %s", receipts[0].Payload, order.UUID)
	}
	env.publish(t, in, kototest.Republish(order))
	kototest.WaitFor(t, "the re-publication to be skipped", func() bool { return duplicates.Load() == 1 })
	if n := handled.Get(order.UUID); n != 2 {
		t.Errorf("handler ran %d times, want 2: once before the failed publish, once after", n)
	}
}

// TestIdempotencyMarksReturnedMessagesOnAck: when the handler returns
// messages, the key is marked once the message is acked (the router
// published them), not when the handler returns. A nack, or a context that
// ends first, marks nothing; a delivery of the same key right after the ack
// waits for the mark and is a duplicate.
func TestIdempotencyMarksReturnedMessagesOnAck(t *testing.T) {
	var calls atomic.Int64
	m := newIdempotency(t, memoryStore(t), middleware.IdempotencyConfig{})
	h := m.Middleware(func(*message.Message) ([]*message.Message, error) {
		calls.Add(1)
		return []*message.Message{message.NewMessage("receipt", nil)}, nil
	})
	deliver := func(ctx context.Context, id string) *message.Message {
		msg := message.NewMessage(id, nil)
		msg.SetContext(ctx)
		if _, err := h(msg); err != nil {
			t.Fatal(err)
		}
		return msg
	}
	const id = "0190c5a4-9d7e-7000-8000-000000000005"
	bg := context.Background()

	deliver(bg, id).Nack() // the router failed to publish
	deliver(bg, id).Ack()
	deliver(bg, id) // a duplicate: no goroutine waits for its ack
	if n := calls.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2: after the nack, not after the ack", n)
	}

	// An outer middleware (Watermill's Timeout, say) cancels the context
	// when the chain returns, before the router publishes and acks.
	ctx, cancel := context.WithCancel(bg)
	first := deliver(ctx, "0190c5a4-9d7e-7000-8000-000000000006")
	cancel()
	first.Ack()
	deliver(bg, "0190c5a4-9d7e-7000-8000-000000000006")
	if n := calls.Load(); n != 3 {
		t.Fatalf("handler ran %d times, want 3: a message acked after its context ended is marked", n)
	}
}

// TestPendingMarkIsAnOutage: a delivery of a key whose earlier delivery
// still waits for its ack fails as an outage after StoreTimeout, rather
// than running the handler a second time; once the first is acked, it is
// a duplicate.
func TestPendingMarkIsAnOutage(t *testing.T) {
	var calls atomic.Int64
	m := newIdempotency(t, memoryStore(t), middleware.IdempotencyConfig{StoreTimeout: 50 * time.Millisecond})
	h := m.Middleware(func(*message.Message) ([]*message.Message, error) {
		calls.Add(1)
		return []*message.Message{message.NewMessage("receipt", nil)}, nil
	})
	const id = "0190c5a4-9d7e-7000-8000-000000000007"
	first := message.NewMessage(id, nil)
	if _, err := h(first); err != nil {
		t.Fatal(err)
	}
	_, err := h(message.NewMessage(id, nil))
	if !errors.Is(err, middleware.ErrMarkPending) || koto.ClassOf(err) != koto.ClassOutage {
		t.Fatalf("second delivery while the first awaits its ack: %v (class %v), want an ErrMarkPending outage", err, koto.ClassOf(err))
	}
	first.Ack()
	// The mark follows the ack on another goroutine: on a loaded machine a
	// delivery may still find it pending, which is the outage above.
	kototest.WaitFor(t, "a delivery after the ack to be skipped", func() bool {
		_, err := h(message.NewMessage(id, nil))
		if err != nil && !errors.Is(err, middleware.ErrMarkPending) {
			t.Fatalf("after the ack: %v", err)
		}
		return err == nil
	})
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

// TestFailedMarkAfterAckIsLogged: a mark made after the ack that fails
// (here with IgnoreStoreErrors, which gives up at once) is logged on a
// warn line of its own, since the delivery's line is already written.
func TestFailedMarkAfterAckIsLogged(t *testing.T) {
	store := &failingStore{Store: memoryStore(t)}
	store.failNext(0, 1)
	dedup := newIdempotency(t, store, middleware.IdempotencyConfig{IgnoreStoreErrors: true})
	logs := &logCapture{}
	h := middleware.Logging(logs.logger())(dedup.Middleware(func(*message.Message) ([]*message.Message, error) {
		return []*message.Message{message.NewMessage("receipt", nil)}, nil
	}))
	msg := message.NewMessage("0190c5a4-9d7e-7000-8000-000000000007", nil)
	if _, err := h(msg); err != nil {
		t.Fatal(err)
	}
	msg.Ack()
	kototest.WaitFor(t, "the failed mark's line", func() bool { return len(logs.lines(t)) == 2 })
	late := logs.lines(t)[1]
	if late["level"] != "WARN" || late["message_uuid"] != msg.UUID || late["error"] == nil {
		t.Errorf("line of the failed mark: %v", late)
	}
}

// TestMarkAfterAckRetriesStoreErrors: with the default configuration, a
// mark after the ack that fails is retried with MarkBackoff until it lands,
// so a later duplicate is still skipped.
func TestMarkAfterAckRetriesStoreErrors(t *testing.T) {
	store := &failingStore{Store: memoryStore(t)}
	store.failNext(0, 2)
	var calls atomic.Int64
	m := newIdempotency(t, store, middleware.IdempotencyConfig{
		MarkBackoff: koto.Backoff{InitialInterval: time.Millisecond, MaxInterval: time.Millisecond},
	})
	h := m.Middleware(func(*message.Message) ([]*message.Message, error) {
		calls.Add(1)
		return []*message.Message{message.NewMessage("receipt", nil)}, nil
	})
	const id = "0190c5a4-9d7e-7000-8000-000000000008"
	first := message.NewMessage(id, nil)
	if _, err := h(first); err != nil {
		t.Fatal(err)
	}
	first.Ack()
	kototest.WaitFor(t, "the duplicate to be skipped after the retried mark", func() bool {
		_, err := h(message.NewMessage(id, nil))
		if err != nil && !errors.Is(err, middleware.ErrMarkPending) {
			t.Fatalf("duplicate: %v", err)
		}
		return err == nil
	})
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1: the mark failed twice and was retried", n)
	}
}
