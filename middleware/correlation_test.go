package middleware_test

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// TestCorrelation: an incoming correlation ID is kept and a missing one is
// generated; either way it is in the handler's context, in the Logging
// line, in the handler's own log records (NewLogHandler) and on the
// messages the handler returns.
func TestCorrelation(t *testing.T) {
	env := newKafkaEnv(t)
	in, out := env.topic(t, "orders"), env.topic(t, "receipts")
	with := message.NewMessage(watermill.NewUUID(), []byte("{}"))
	with.Metadata.Set(correlation.MetadataKey, "corr-incoming")
	without := message.NewMessage(watermill.NewUUID(), []byte("{}"))
	env.publish(t, in, with, without)

	logs := &logCapture{}
	handlerLog := slog.New(middleware.NewLogHandler(logs.logger().Handler()))
	var mu sync.Mutex
	inContext := map[string]string{} // incoming UUID → correlation.FromContext
	produce := func(msg *message.Message) ([]*message.Message, error) {
		mu.Lock()
		inContext[msg.UUID] = correlation.FromContext(msg.Context())
		mu.Unlock()
		handlerLog.InfoContext(msg.Context(), "inside handler", "in", msg.UUID)
		receipt := message.NewMessage(watermill.NewUUID(), []byte(msg.UUID))
		return []*message.Message{receipt}, nil
	}
	mws := defaultsChain(t, middleware.Config{Publisher: env.pub, Logger: logs.logger()})
	env.runRouter(t, handlerSpec{name: kototest.Group(t, "billing"), topic: in, middlewares: mws, produce: produce, publishTopic: out})
	receipts := env.collect(t, out, 2)

	mu.Lock()
	defer mu.Unlock()
	if got := inContext[with.UUID]; got != "corr-incoming" {
		t.Errorf("incoming ID: context has %q, want corr-incoming", got)
	}
	generated := inContext[without.UUID]
	if id, err := uuid.Parse(generated); err != nil || id.Version() != 7 {
		t.Errorf("missing ID: context has %q, want a new UUIDv7", generated)
	}
	want := map[string]string{with.UUID: "corr-incoming", without.UUID: generated}
	for _, r := range receipts {
		if got := correlation.FromMessage(r); got != want[string(r.Payload)] {
			t.Errorf("returned message for %s has correlation ID %q, want %q", r.Payload, got, want[string(r.Payload)])
		}
	}
	lines := logs.lines(t)
	for uuid, id := range want {
		for _, msg := range []string{"message handled", "inside handler"} {
			var found bool
			for _, l := range where(lines, "msg", msg) {
				if l["message_uuid"] == uuid || l["in"] == uuid {
					found = true
					if l["correlation_id"] != id {
						t.Errorf("%q line for %s: correlation_id %v, want %s", msg, uuid, l["correlation_id"], id)
					}
				}
			}
			if !found {
				t.Errorf("no %q line for %s", msg, uuid)
			}
		}
	}
}

// receiptIssuedEvent is published from inside a handler in
// TestCorrelationReachesEventsPublishedInTheHandler.
type receiptIssuedEvent struct {
	Order string `json:"order"`
}

// TestCorrelationReachesEventsPublishedInTheHandler: an event published
// through the cqrs event bus from inside a handler behind Correlation
// carries the incoming correlation ID: the bus reads it from the context.
func TestCorrelationReachesEventsPublishedInTheHandler(t *testing.T) {
	env := newKafkaEnv(t)
	in := env.topic(t, "orders")
	service := kototest.Topic(t, "billing")
	out := topics.Event(service, topics.TypeName(receiptIssuedEvent{}))
	env.provision(t, out)
	bus, err := cqrs.NewEventPublisher(env.pub, cqrs.EventPublisherConfig{Service: service})
	if err != nil {
		t.Fatal(err)
	}
	msg := message.NewMessage(watermill.NewUUID(), []byte("{}"))
	msg.Metadata.Set(correlation.MetadataKey, "corr-bus")
	env.publish(t, in, msg)

	mws := defaultsChain(t, middleware.Config{Publisher: env.pub, Logger: slog.New(slog.DiscardHandler)})
	env.runRouter(t, handlerSpec{name: kototest.Group(t, "billing"), topic: in, middlewares: mws,
		handle: func(m *message.Message) error {
			return bus.Publish(m.Context(), receiptIssuedEvent{Order: m.UUID})
		}})
	event := env.collect(t, out, 1)[0]
	if got := correlation.FromMessage(event); got != "corr-bus" {
		t.Errorf("event published in the handler has correlation ID %q, want corr-bus", got)
	}
}
