package middleware_test

import (
	"encoding/json"
	"errors"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// kindHandler fails as the payload's kind says: "fail-once" and
// "outage-once" fail the first attempt (the second as an outage),
// "permanent" always fails permanently.
func kindHandler(attempts *kototest.Counter) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		var o order
		if err := json.Unmarshal(msg.Payload, &o); err != nil {
			return err
		}
		first := attempts.Add(msg.UUID) == 1
		switch {
		case o.Kind == "fail-once" && first:
			return errors.New("first attempt fails")
		case o.Kind == "outage-once" && first:
			return koto.Outage(errors.New("database unreachable"))
		case o.Kind == "permanent":
			return koto.Poison(errors.New("order rejected"))
		}
		return nil
	}
}

// TestLoggingLine checks the fields and levels of the log lines, parsed from
// slog's JSON output, for every outcome but nacked (see
// TestDeadLetterPublishFailureNacks).
func TestLoggingLine(t *testing.T) {
	env := newKafkaEnv(t)
	topic := env.topic(t, "orders")
	group := kototest.Group(t, "payments")
	env.provision(t, topics.DeadLetter(group))

	ok := orderMessage(`{"kind":"ok"}`)
	ok.Metadata.Set(correlation.MetadataKey, "corr-ok")
	failOnce := orderMessage(`{"kind":"fail-once"}`)
	dup := kototest.Republish(ok)
	poison := orderMessage(`{"kind":"permanent"}`)
	outage := orderMessage(`{"kind":"outage-once"}`)
	last := orderMessage(`{"kind":"ok"}`)
	env.publish(t, topic, ok, failOnce, dup, poison, outage, last) // one partition, in order

	logs := &logCapture{}
	mws := defaultsChain(t, middleware.Config{
		Publisher:  env.pub,
		Store:      memoryStore(t),
		Logger:     logs.logger(),
		DeadLetter: middleware.DeadLetterConfig{Backoff: koto.Backoff{InitialInterval: fastBackoff.initial, MaxInterval: fastBackoff.max}},
	})
	attempts := new(kototest.Counter)
	stop := env.runRouter(t, handlerSpec{name: group, topic: topic, middlewares: mws, handle: kindHandler(attempts)})
	kototest.WaitFor(t, "six handled lines", func() bool { return len(where(logs.lines(t), "msg", "message handled")) == 6 })
	stop()

	lines := logs.lines(t)
	done := where(lines, "msg", "message handled")
	want := []struct {
		msg      *message.Message
		offset   float64
		level    string
		outcome  string
		attempts float64 // 0: absent
	}{
		{ok, 0, "DEBUG", "ok", 0},
		{failOnce, 1, "DEBUG", "ok", 2},
		{dup, 2, "DEBUG", "duplicate", 0},
		{poison, 3, "ERROR", "dead-lettered", 0},
		{outage, 4, "DEBUG", "ok", 2},
		{last, 5, "DEBUG", "ok", 0},
	}
	partition := done[0]["partition"]
	for i, w := range want {
		l := done[i]
		check := func(key string, value any) {
			t.Helper()
			if l[key] != value {
				t.Errorf("line %d (%s): %s = %v, want %v", i, w.outcome, key, l[key], value)
			}
		}
		check("level", w.level)
		check("outcome", w.outcome)
		check("handler", group)
		check("topic", topic)
		check("partition", partition)
		check("offset", w.offset)
		check("message_uuid", w.msg.UUID)
		check("attempts", map[bool]any{true: w.attempts, false: nil}[w.attempts > 0])
		if d, isNum := l["duration"].(float64); !isNum || d < 0 {
			t.Errorf("line %d: duration = %v, want nanoseconds", i, l["duration"])
		}
		if id, _ := l["correlation_id"].(string); id == "" {
			t.Errorf("line %d: no correlation_id", i)
		}
	}
	if partition == nil {
		t.Error("no partition on the log lines")
	}
	if done[0]["correlation_id"] != "corr-ok" || done[2]["correlation_id"] != "corr-ok" {
		t.Errorf("correlation IDs %v, %v; want corr-ok", done[0]["correlation_id"], done[2]["correlation_id"])
	}
	if _, has := done[0]["error"]; has {
		t.Errorf("ok line has an error: %v", done[0]["error"])
	}
	if done[2]["idempotency_scope"] != group || done[2]["idempotency_key"] != ok.UUID {
		t.Errorf("duplicate line: scope %v key %v, want %s %s", done[2]["idempotency_scope"], done[2]["idempotency_key"], group, ok.UUID)
	}
	if done[3]["error"] != "order rejected" || done[3]["error_class"] != "poison" || done[3]["dead_letter_topic"] != topics.DeadLetter(group) {
		t.Errorf("dead-lettered line: error %v class %v topic %v", done[3]["error"], done[3]["error_class"], done[3]["dead_letter_topic"])
	}

	retries := where(lines, "outcome", "retry")
	if len(retries) != 2 {
		t.Fatalf("%d retry lines, want 2: %v", len(retries), retries)
	}
	for i, w := range []struct {
		msg        *message.Message
		err, class string
	}{{failOnce, "first attempt fails", "retryable"}, {outage, "database unreachable", "outage"}} {
		r := retries[i]
		if r["level"] != "WARN" || r["message_uuid"] != w.msg.UUID || r["error"] != w.err ||
			r["error_class"] != w.class || r["attempts"] != 1.0 || r["retry_delay"] == nil {
			t.Errorf("retry line %d: %v", i, r)
		}
	}
}

// TestDeadLetterPublishFailureNacks: when the dead letter cannot be
// published, the message is nacked (outcome nacked in the log), not acked:
// a later consumer whose publisher works dead-letters it.
func TestDeadLetterPublishFailureNacks(t *testing.T) {
	env := newKafkaEnv(t)
	topic := env.topic(t, "orders")
	group := kototest.Group(t, "payments")
	env.provision(t, topics.DeadLetter(group))
	poison := message.NewMessage(watermill.NewUUID(), []byte(`{"kind":"permanent"}`))
	env.publish(t, topic, poison)

	closed, err := broker.NewPublisher(broker.Config{Brokers: env.brokers})
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	logs := &logCapture{}
	mws := defaultsChain(t, middleware.Config{Publisher: closed, Logger: logs.logger()})
	attempts := new(kototest.Counter)
	stop := env.runRouter(t, handlerSpec{name: group, topic: topic, middlewares: mws, handle: kindHandler(attempts)})
	kototest.WaitFor(t, "two nacked deliveries", func() bool { return len(where(logs.lines(t), "outcome", "nacked")) >= 2 })
	stop()
	l := where(logs.lines(t), "outcome", "nacked")[0]
	if l["level"] != "WARN" || l["message_uuid"] != poison.UUID || l["error"] == nil {
		t.Errorf("nacked line: %v", l)
	}
	if n := kototest.Records(t, env.brokers, topics.DeadLetter(group)); n != 0 {
		t.Fatalf("%d dead letters with a closed publisher", n)
	}

	// Nothing was acked: the same group, now with a working publisher,
	// gets the message again and dead-letters it.
	env.runRouter(t, handlerSpec{name: group, topic: topic, middlewares: defaults(t, env.pub, nil, nil), handle: kindHandler(attempts)})
	dl := env.collect(t, topics.DeadLetter(group), 1)[0]
	if dl.UUID != poison.UUID {
		t.Errorf("dead letter %s, want %s", dl.UUID, poison.UUID)
	}
}
