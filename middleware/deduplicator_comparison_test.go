package middleware_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	wmmiddleware "github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// failsFirstTime returns a handler that fails the first delivery of every
// message and succeeds on the next, recording the successes.
func failsFirstTime(calls, succeeded *kototest.Counter) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		if calls.Add(msg.UUID) == 1 {
			return errors.New("temporary failure")
		}
		succeeded.Add(msg.UUID)
		return nil
	}
}

// countDeliveries is an outermost middleware that counts every delivery the
// router makes, whatever the middlewares inside do with it.
func countDeliveries(n *atomic.Int64) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			n.Add(1)
			return h(msg)
		}
	}
}

// TestWhyThisProjectExists_DeduplicatorLosesFailedMessages documents the
// reason this project exists, next to the fix.
//
// A handler fails the first time it sees each of 100 messages; the router
// nacks each failure and Kafka redelivers it.
//
// Watermill's own middleware.Deduplicator records a message's key *before*
// the handler runs. The first delivery fails, the redelivery finds the key
// and is acked without the handler: all 100 messages are lost, silently.
// This subtest asserts that loss; if Watermill ever fixes it, this subtest
// fails and the comment should be revisited.
//
// middleware.Idempotency checks, handles and marks only after success, so
// the redelivery runs the handler and all 100 are processed.
func TestWhyThisProjectExists_DeduplicatorLosesFailedMessages(t *testing.T) {
	const n = 100
	cases := []struct {
		name          string
		dedup         func(t *testing.T) message.HandlerMiddleware
		wantSucceeded int
	}{
		{"watermill Deduplicator loses them", watermillDeduplicator, 0},
		{"Idempotency processes them after their retry", kotoIdempotency, n},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newKafkaEnv(t)
			topic := env.topic(t, "orders")
			env.publish(t, topic, newMessages(n)...)

			calls, succeeded := new(kototest.Counter), new(kototest.Counter)
			var deliveries atomic.Int64
			env.runRouter(t, handlerSpec{
				name: kototest.Group(t, "payments"), topic: topic,
				// Only deduplication between the router and the handler: a
				// failure is nacked and redelivered by the subscriber.
				middlewares: []message.HandlerMiddleware{countDeliveries(&deliveries), c.dedup(t)},
				handle:      failsFirstTime(calls, succeeded),
			})
			// Every message is delivered once and fails, then redelivered.
			kototest.WaitFor(t, "each message to be delivered twice", func() bool { return deliveries.Load() >= 2*n })

			if got := succeeded.Distinct(); got != c.wantSucceeded {
				t.Errorf("%d of %d messages processed, want %d", got, n, c.wantSucceeded)
			}
			if got := calls.Distinct(); got != n {
				t.Errorf("handler saw %d distinct messages, want %d", got, n)
			}
		})
	}
}

// watermillDeduplicator is Watermill's Deduplicator keyed by message UUID
// (so only true redeliveries collide), with its in-memory repository.
func watermillDeduplicator(t *testing.T) message.HandlerMiddleware {
	t.Helper()
	repo, err := wmmiddleware.NewMapExpiringKeyRepository(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	d := &wmmiddleware.Deduplicator{
		KeyFactory: func(msg *message.Message) (string, error) { return msg.UUID, nil },
		Repository: repo,
		Timeout:    time.Second,
	}
	return d.Middleware
}

func kotoIdempotency(t *testing.T) message.HandlerMiddleware {
	t.Helper()
	mw, err := middleware.Idempotency(memoryStore(t), middleware.IdempotencyConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return mw
}
