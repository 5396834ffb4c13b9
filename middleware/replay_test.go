package middleware_test

import (
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

// TestDeadLetterReplayRunsAgain: in the order Defaults builds, a
// dead-lettered message is not marked processed, so replaying it from the
// dead-letter topic with the same UUID runs the handler again (had
// Idempotency been outside DeadLetter, the replay would be skipped as a
// duplicate).
func TestDeadLetterReplayRunsAgain(t *testing.T) {
	env := newKafkaEnv(t)
	topic := env.topic(t, "orders")
	group := kototest.Group(t, "payments")
	dlq := topics.DeadLetter(group)
	env.provision(t, dlq)
	msg := newMessages(1)[0]
	env.publish(t, topic, msg)

	var fixed atomic.Bool // the bug is fixed before the replay
	handled := new(kototest.Counter)
	var duplicates atomic.Int64
	env.runRouter(t, handlerSpec{
		name: group, topic: topic,
		middlewares: defaults(t, env.pub, memoryStore(t), &duplicates),
		handle: func(m *message.Message) error {
			if !fixed.Load() {
				return errPoisonBug
			}
			handled.Add(m.UUID)
			return nil
		},
	})
	dl := env.collect(t, dlq, 1)[0]
	fixed.Store(true)
	env.publish(t, topic, kototest.Republish(dl))
	kototest.WaitFor(t, "the replay to be handled", func() bool { return handled.Get(msg.UUID) == 1 || duplicates.Load() > 0 })
	if d := duplicates.Load(); d != 0 {
		t.Fatalf("the replay was skipped as a duplicate")
	}
}
