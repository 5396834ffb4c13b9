package middleware_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// TestRestartRemembersProcessedMessages: 500 messages processed with the
// PostgreSQL store; the router stops; the consumer group is deleted, so the
// same group starts again at the oldest offset; a new router with a new
// Store on the same table gets all 500 again and processes none of them.
func TestRestartRemembersProcessedMessages(t *testing.T) {
	env := newKafkaEnv(t)
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	topic := env.topic(t, "orders")
	group := kototest.Group(t, "payments")
	msgs := newMessages(500)
	env.publish(t, topic, msgs...)

	handled := new(kototest.Counter)
	stop := env.runRouter(t, handlerSpec{
		name: group, topic: topic,
		middlewares: defaults(t, env.pub, postgresStoreIn(t, pool, schema), nil),
		handle:      countingHandler(handled),
	})
	kototest.WaitFor(t, "500 messages processed", func() bool { return handled.Distinct() == len(msgs) })
	stop()

	resetGroup(t, env, group)
	var duplicates atomic.Int64
	env.runRouter(t, handlerSpec{
		name: group, topic: topic,
		middlewares: defaults(t, env.pub, postgresStoreIn(t, pool, schema), &duplicates),
		handle:      countingHandler(handled),
	})
	kototest.WaitFor(t, "500 redeliveries", func() bool { return duplicates.Load() >= int64(len(msgs)) })
	if got := handled.Total(); got != len(msgs) {
		t.Errorf("side effect happened %d times for %d messages across a restart", got, len(msgs))
	}
}

// resetGroup deletes a consumer group that has no members left, so that
// it starts again at the oldest offset (the subscriber's default).
func resetGroup(t *testing.T, env *kafkaEnv, group string) {
	t.Helper()
	adm := kototest.Admin(t, env.brokers)
	kototest.WaitFor(t, "the consumer group to be deleted", func() bool {
		resp, err := adm.DeleteGroups(context.Background(), group)
		if err != nil {
			return false
		}
		r, ok := resp[group]
		return ok && r.Err == nil
	})
}

// TestStoreOutageLosesNothing: the idempotency store's database is cut
// (TCP proxy) mid-stream while messages flow, then restored. No message is
// dead-lettered, none is lost, and each is processed exactly once.
func TestStoreOutageLosesNothing(t *testing.T) {
	env := newKafkaEnv(t)
	pool, proxy := pgtest.ProxiedPool(t)
	store := postgresStore(t, pool)
	topic := env.topic(t, "orders")
	group := kototest.Group(t, "payments")
	env.provision(t, topics.DeadLetter(group))
	msgs := newMessages(300)

	handled := new(kototest.Counter)
	var duplicates atomic.Int64
	logs := &logCapture{}
	mws := defaultsChain(t, middleware.Config{
		Publisher: env.pub,
		Store:     store,
		Logger:    logs.logger(),
		Idempotency: middleware.IdempotencyConfig{
			MarkBackoff: koto.Backoff{InitialInterval: fastBackoff.initial, MaxInterval: fastBackoff.max},
			OnDuplicate: func(*message.Message, string, string) { duplicates.Add(1) },
		},
		DeadLetter: middleware.DeadLetterConfig{
			MaxAttempts: 2, // were a store error not an outage, it would soon be dead-lettered
			Backoff:     koto.Backoff{InitialInterval: fastBackoff.initial, MaxInterval: 100 * time.Millisecond},
		},
	})
	env.runRouter(t, handlerSpec{name: group, topic: topic, middlewares: mws, handle: countingHandler(handled)})
	env.publish(t, topic, msgs[:100]...)
	kototest.WaitFor(t, "the first 100 messages", func() bool { return handled.Distinct() == 100 })

	proxy.Cut()
	defer proxy.Restore()                   // should the test fail first, for the cleanup
	env.publish(t, topic, msgs[100:200]...) // published during the outage
	// The partitions are now stuck on store calls, retried as outages; with
	// backoffs capped at 100 ms, 60 retries over 3 partitions take seconds.
	kototest.WaitFor(t, "60 retries of the outage", func() bool {
		return len(where(logs.lines(t), "error_class", "outage")) >= 60
	})
	if n := handled.Distinct(); n != 100 {
		t.Errorf("%d messages processed while the store was down, want 100", n)
	}
	proxy.Restore()
	env.publish(t, topic, msgs[200:]...)

	kototest.WaitFor(t, "all 300 messages", func() bool { return handled.Distinct() == len(msgs) })
	if got := handled.Total(); got != len(msgs) {
		t.Errorf("side effect happened %d times for %d messages", got, len(msgs))
	}
	if d := duplicates.Load(); d != 0 {
		t.Errorf("%d messages skipped as duplicates", d)
	}
	if n := kototest.Records(t, env.brokers, topics.DeadLetter(group)); n != 0 {
		t.Errorf("%d messages dead-lettered during a store outage", n)
	}
	outage := where(logs.lines(t), "error_class", "outage")
	t.Logf("%d outage retries, e.g. %v", len(outage), outage[0]["error"])
}
