package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/topics"
)

// TestTransactionalEffectsHappenOnce: 500 messages and 200 re-publications
// of some of them with the same UUID, through a router in the
// transactional mode whose handler inserts a row per message in the
// claim's transaction: exactly 500 rows, one per message.
func TestTransactionalEffectsHappenOnce(t *testing.T) {
	env := newKafkaEnv(t)
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	store, fx := postgresStoreIn(t, pool, schema), newEffects(t, pool, schema)
	topic := env.topic(t, "orders")
	originals := newMessages(500)
	env.publish(t, topic, kototest.WithDuplicates(originals, func(i int) bool { return i%5 < 2 })...) // 200 duplicates

	var duplicates atomic.Int64
	logs := &logCapture{}
	group := kototest.Group(t, "payments")
	env.runRouter(t, handlerSpec{
		name: group, topic: topic,
		middlewares: transactionalDefaults(t, env.pub, store, logs.logger(), &duplicates),
		handle:      fx.insert,
	})
	kototest.WaitFor(t, "700 deliveries", func() bool {
		_, distinct := fx.counts()
		return distinct == len(originals) && duplicates.Load() >= 200
	})
	if rows, distinct := fx.counts(); rows != len(originals) || distinct != len(originals) {
		t.Errorf("%d effect rows for %d distinct messages, want %d of each", rows, distinct, len(originals))
	}
	kototest.WaitFor(t, "a log line per duplicate", func() bool {
		return len(where(logs.lines(t), "outcome", "duplicate")) == int(duplicates.Load())
	})
	t.Logf("%d duplicates skipped", duplicates.Load())
}

// attempt is the payload of TestTransactionalFailureRollsBackTheClaim.
type attempt struct {
	N    int    `json:"n"`
	Fail string `json:"fail"` // "", "once" or "always"
}

// TestTransactionalFailureRollsBackTheClaim: the handler writes its row,
// then fails, for some messages on their first attempt and for one on
// every attempt. The retries run the handler again (the failed attempt's
// claim is gone) and their rows exist once; the message that always fails
// is dead-lettered with neither a row nor a claim left behind.
func TestTransactionalFailureRollsBackTheClaim(t *testing.T) {
	env := newKafkaEnv(t)
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	store, fx := postgresStoreIn(t, pool, schema), newEffects(t, pool, schema)
	topic := env.topic(t, "orders")
	group := kototest.Group(t, "payments")
	env.provision(t, topics.DeadLetter(group))

	msgs := newMessages(100)
	for i, m := range msgs {
		a := attempt{N: i}
		switch {
		case i == 50:
			a.Fail = "always"
		case i%5 == 0:
			a.Fail = "once"
		}
		m.Payload, _ = json.Marshal(a)
	}
	calls := new(kototest.Counter)
	handle := func(msg *message.Message) error {
		var a attempt
		if err := json.Unmarshal(msg.Payload, &a); err != nil {
			return err
		}
		n := calls.Add(msg.UUID)
		if err := fx.insert(msg); err != nil {
			return err
		}
		if a.Fail == "always" || a.Fail == "once" && n == 1 {
			return errors.New("failed after writing")
		}
		return nil
	}
	var duplicates atomic.Int64
	env.runRouter(t, handlerSpec{
		name: group, topic: topic,
		middlewares: transactionalDefaults(t, env.pub, store, nil, &duplicates),
		handle:      handle,
	})
	env.publish(t, topic, msgs...)
	kototest.WaitFor(t, "99 messages handled and one dead-lettered", func() bool {
		_, distinct := fx.counts()
		return distinct == len(msgs)-1 && kototest.Records(t, env.brokers, topics.DeadLetter(group)) == 1
	})

	if rows, _ := fx.counts(); rows != len(msgs)-1 {
		t.Errorf("%d effect rows for %d messages that succeeded", rows, len(msgs)-1)
	}
	if d := duplicates.Load(); d != 0 {
		t.Errorf("%d retries skipped as duplicates of a failed attempt", d)
	}
	for i, m := range msgs {
		if i%5 == 0 && i != 50 && calls.Get(m.UUID) != 2 {
			t.Errorf("message %d, failing once, was handled %d times, want 2", i, calls.Get(m.UUID))
		}
	}
	poison := msgs[50]
	done, err := store.IsProcessed(context.Background(), idempotency.ScopedKey(group, poison.UUID))
	if err != nil || done {
		t.Errorf("dead-lettered message left a claim: IsProcessed = %v, %v", done, err)
	}
}

// TestTransactionalOutageLosesNothing: PostgreSQL is cut (TCP proxy)
// mid-stream, by the handler of one message after its insert and before
// the commit, while 300 messages flow through the transactional mode; then
// it is restored. No message is dead-lettered and each has its effect
// once: the commit that failed with the connection rolled back, and its
// retry ran the handler again.
func TestTransactionalOutageLosesNothing(t *testing.T) {
	env := newKafkaEnv(t)
	direct := pgtest.Pool(t)
	schema := pgtest.Schema(t, direct)
	fx := newEffects(t, direct, schema) // read past the proxy
	pool, proxy := pgtest.ProxiedPool(t)
	store := postgresStoreIn(t, pool, schema)
	topic := env.topic(t, "orders")
	group := kototest.Group(t, "payments")
	env.provision(t, topics.DeadLetter(group))
	msgs := newMessages(300)

	var cut sync.Once
	calls := new(kototest.Counter)
	handle := func(msg *message.Message) error {
		calls.Add(msg.UUID)
		if err := fx.insert(msg); err != nil {
			return err
		}
		if msg.UUID == msgs[150].UUID {
			cut.Do(proxy.Cut)
		}
		return nil
	}
	logs := &logCapture{}
	var duplicates atomic.Int64
	env.runRouter(t, handlerSpec{
		name: group, topic: topic,
		middlewares: transactionalDefaults(t, env.pub, store, logs.logger(), &duplicates),
		handle:      handle,
	})
	defer proxy.Restore() // should the test fail first, for the cleanup
	env.publish(t, topic, msgs...)
	// MaxAttempts is 3: were the outage not recognised, the messages would
	// soon be dead-lettered.
	kototest.WaitFor(t, "30 retries of the outage", func() bool {
		return len(where(logs.lines(t), "error_class", "outage")) >= 30
	})
	if rows, _ := fx.counts(); rows == len(msgs) {
		t.Errorf("every message had its effect although the database was cut at the 151st")
	}
	proxy.Restore()

	kototest.WaitFor(t, "all 300 messages", func() bool { _, n := fx.counts(); return n == len(msgs) })
	if rows, _ := fx.counts(); rows != len(msgs) {
		t.Errorf("%d effect rows for %d messages", rows, len(msgs))
	}
	if n := calls.Get(msgs[150].UUID); n < 2 {
		t.Errorf("the message whose commit was cut was handled %d times; its retry should run it again", n)
	}
	if n := kototest.Records(t, env.brokers, topics.DeadLetter(group)); n != 0 {
		t.Errorf("%d messages dead-lettered during a database outage", n)
	}
	outage := where(logs.lines(t), "error_class", "outage")
	retryable := where(logs.lines(t), "error_class", "retryable")
	for _, l := range retryable {
		t.Errorf("a failure during the outage was not classified as one: %v", l["error"])
	}
	t.Logf("%d outage retries, e.g. %v; %d duplicates (commits whose reply was cut)", len(outage), outage[0]["error"], duplicates.Load())
}
