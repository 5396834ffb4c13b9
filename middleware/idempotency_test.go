package middleware_test

import (
	"log/slog"
	"sync/atomic"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// storeKinds are the stores the end-to-end idempotency tests run against.
var storeKinds = []struct {
	name string
	new  func(t *testing.T) idempotency.Store
}{
	{"memory", func(t *testing.T) idempotency.Store { return memoryStore(t) }},
	{"postgres", func(t *testing.T) idempotency.Store { return postgresStore(t, pgtest.Pool(t)) }},
}

// defaults builds the recommended chain with short backoffs; onDuplicate
// counts duplicates.
func defaults(t *testing.T, pub message.Publisher, store idempotency.Store, duplicates *atomic.Int64) []message.HandlerMiddleware {
	t.Helper()
	mws := defaultsChain(t, middleware.Config{
		Publisher: pub,
		Store:     store,
		Logger:    slog.New(slog.DiscardHandler),
		Idempotency: middleware.IdempotencyConfig{
			MarkBackoff: koto.Backoff{InitialInterval: fastBackoff.initial, MaxInterval: fastBackoff.max},
			OnDuplicate: func(*message.Message, string, string) {
				if duplicates != nil {
					duplicates.Add(1)
				}
			},
		},
		DeadLetter: middleware.DeadLetterConfig{
			Backoff: koto.Backoff{InitialInterval: fastBackoff.initial, MaxInterval: fastBackoff.max},
		},
	})
	return mws
}

// countingHandler records each message UUID it handles: its side effect.
func countingHandler(c *kototest.Counter) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		c.Add(msg.UUID)
		return nil
	}
}

// TestDuplicatesAreSkipped: 1000 distinct messages and 300 re-publications
// of some of them with the same UUID, interleaved on their partitions: the
// handler's side effect happens exactly once per distinct message.
func TestDuplicatesAreSkipped(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			env := newKafkaEnv(t)
			store := kind.new(t)
			topic := env.topic(t, "orders")
			originals := newMessages(1000)
			env.publish(t, topic, kototest.WithDuplicates(originals, func(i int) bool { return i%10 < 3 })...) // 300 duplicates

			handled := new(kototest.Counter)
			var duplicates atomic.Int64
			group := kototest.Group(t, "payments")
			env.runRouter(t, handlerSpec{
				name: group, topic: topic,
				middlewares: defaults(t, env.pub, store, &duplicates),
				handle:      countingHandler(handled),
			})
			kototest.WaitFor(t, "1300 deliveries", func() bool {
				return handled.Distinct() == len(originals) && duplicates.Load() >= 300
			})

			if got := handled.Total(); got != len(originals) {
				t.Errorf("side effect happened %d times for %d distinct messages", got, len(originals))
			}
			for _, m := range originals {
				if n := handled.Get(m.UUID); n != 1 {
					t.Errorf("message %s handled %d times", m.UUID, n)
				}
			}
			t.Logf("%d duplicates skipped", duplicates.Load())
		})
	}
}

// TestScopeSeparatesHandlers: two handlers of the same topic in one router,
// with different names (so different consumer groups and scopes) and one
// store, both process every message.
func TestScopeSeparatesHandlers(t *testing.T) {
	env := newKafkaEnv(t)
	store := memoryStore(t)
	topic := env.topic(t, "orders")
	msgs := newMessages(50)
	env.publish(t, topic, msgs...)

	billing, shipping := new(kototest.Counter), new(kototest.Counter)
	var duplicates atomic.Int64
	env.runRouter(t,
		handlerSpec{name: kototest.Group(t, "billing"), topic: topic, middlewares: defaults(t, env.pub, store, &duplicates), handle: countingHandler(billing)},
		handlerSpec{name: kototest.Group(t, "shipping"), topic: topic, middlewares: defaults(t, env.pub, store, &duplicates), handle: countingHandler(shipping)},
	)
	kototest.WaitFor(t, "both handlers to see every message", func() bool {
		return billing.Total()+shipping.Total()+int(duplicates.Load()) >= 2*len(msgs)
	})
	for _, m := range msgs {
		if billing.Get(m.UUID) != 1 || shipping.Get(m.UUID) != 1 {
			t.Errorf("message %s: billing handled it %d times, shipping %d", m.UUID, billing.Get(m.UUID), shipping.Get(m.UUID))
		}
	}
	if d := duplicates.Load(); d != 0 {
		t.Errorf("%d messages were skipped as duplicates of the other handler's work", d)
	}
}
