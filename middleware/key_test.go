package middleware_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// TestKeyFallsBackToKafkaPosition: records from a non-Watermill producer
// have no UUID; their key is topic/partition/offset. Two records with the
// same payload are both processed, and their redelivery (the group reset
// to the oldest offset) is skipped.
func TestKeyFallsBackToKafkaPosition(t *testing.T) {
	env := newKafkaEnv(t)
	topic := env.topic(t, "legacy")
	group := kototest.Group(t, "payments")
	produceRaw(t, env, topic, "same", "same")

	store := memoryStore(t)
	handled := new(kototest.Counter)
	var keys []string // written by one partition's handler at a time
	run := func(duplicates *atomic.Int64) func() {
		mws := defaultsChain(t, middleware.Config{
			Publisher: env.pub, Store: store, Logger: slog.New(slog.DiscardHandler),
			Idempotency: middleware.IdempotencyConfig{OnDuplicate: func(_ *message.Message, _, key string) {
				keys = append(keys, key)
				duplicates.Add(1)
			}},
		})
		return env.runRouter(t, handlerSpec{name: group, topic: topic, middlewares: mws,
			handle: func(m *message.Message) error {
				handled.Add(m.UUID + string(m.Payload))
				return nil
			}})
	}
	var none, duplicates atomic.Int64
	stop := run(&none)
	kototest.WaitFor(t, "both records", func() bool { return handled.Total() == 2 })
	stop()
	resetGroup(t, env, group)
	run(&duplicates)
	kototest.WaitFor(t, "both redeliveries", func() bool { return duplicates.Load() == 2 })

	if handled.Total() != 2 || none.Load() != 0 {
		t.Errorf("handled %d times, %d duplicates at first; want 2 and 0", handled.Total(), none.Load())
	}
	var offsets []string
	for _, k := range keys {
		var part, off int
		if _, err := fmt.Sscanf(k, topic+"/%d/%d", &part, &off); err != nil {
			t.Errorf("key %q is not %s/partition/offset: %v", k, topic, err)
		}
		offsets = append(offsets, strconv.Itoa(off))
	}
	if len(offsets) == 2 && offsets[0] == offsets[1] {
		t.Errorf("keys %v name the same offset", keys)
	}
}

// produceRaw writes records without Watermill headers to one partition, as
// a non-Watermill producer would.
func produceRaw(t *testing.T, env *kafkaEnv, topic string, values ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, v := range values {
		rec := &kgo.Record{Key: []byte("k"), Value: []byte(v)}
		if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}
