package middleware_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// TestKeyOfHeaderlessRecordSurvivesTopicRecreation: a record without a UUID
// is handled; its topic is deleted and created again within the window, and
// a new headerless record lands at the same partition and offset. It is
// handled too, not skipped as a duplicate of the first.
func TestKeyOfHeaderlessRecordSurvivesTopicRecreation(t *testing.T) {
	kototest.VerifyNoLeaks(t)
	env := newKafkaEnv(t)
	topic := env.topic(t, "legacy")
	group := kototest.Group(t, "payments")
	store := memoryStore(t)
	handled := new(kototest.Counter) // by partition/offset
	var duplicates atomic.Int64
	run := func() func() {
		mws := defaultsChain(t, middleware.Config{
			Publisher: env.pub, Store: store, Logger: slog.New(slog.DiscardHandler),
			Idempotency: middleware.IdempotencyConfig{OnDuplicate: func(*message.Message, string, string) {
				duplicates.Add(1)
			}},
		})
		return env.runRouter(t, handlerSpec{name: group, topic: topic, middlewares: mws,
			handle: func(m *message.Message) error {
				p, _ := koto.PositionFromContext(m.Context())
				handled.Add(fmt.Sprintf("%d/%d", p.Partition, p.Offset))
				return nil
			}})
	}

	produceRaw(t, env, topic, "first")
	stop := run()
	kototest.WaitFor(t, "the first record", func() bool { return handled.Total() == 1 })
	stop()

	ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
	defer cancel()
	resp, err := kototest.Admin(t, env.brokers).DeleteTopics(ctx, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete %s: %v", topic, err)
	}
	env.provision(t, topic)
	resetGroup(t, env, group) // its committed offset was the old topic's
	produceRaw(t, env, topic, "second")
	run()
	kototest.WaitFor(t, "the second record, handled or skipped", func() bool {
		return handled.Total() == 2 || duplicates.Load() > 0
	})
	if n := duplicates.Load(); n != 0 {
		t.Fatalf("the record on the recreated topic was skipped as a duplicate (%d)", n)
	}
	if handled.Distinct() != 1 {
		t.Fatalf("the two records were at %d positions, want the same partition and offset", handled.Distinct())
	}
}
