package middleware_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// order is the payload of the poison tests.
type order struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
}

// handleOrder decodes an order and fails as its kind says. A payload that
// does not decode can never succeed, so it marks the decode error with
// koto.Poison, as every decoder of a message's payload should.
func handleOrder(processed *kototest.Counter, seq *[]string) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		var o order
		if err := json.Unmarshal(msg.Payload, &o); err != nil {
			return koto.Poison(fmt.Errorf("decode order: %w", err))
		}
		switch o.Kind {
		case "permanent":
			return koto.Poison(errors.New("order rejected"))
		case "panic":
			panic("boom")
		case "flaky":
			return errors.New("still failing")
		}
		if processed.Add(o.ID) == 1 {
			*seq = append(*seq, o.ID) // one partition: one message at a time
		}
		return nil
	}
}

func orderMessage(payload string) *message.Message {
	m := message.NewMessage(watermill.NewUUID(), []byte(payload))
	m.Metadata.Set(koto.PartitionKeyMetadataKey, "one-partition")
	m.Metadata.Set("tenant", "acme")
	return m
}

// TestPoisonGoesToDeadLetterAndThePartitionMovesOn: a payload that does not
// decode, a permanent error, a panic and an error that outlives its retries
// each land on the dead-letter topic with every metadata key filled in,
// while the messages after them on the same partition are processed.
func TestPoisonGoesToDeadLetterAndThePartitionMovesOn(t *testing.T) {
	env := newKafkaEnv(t)
	topic := env.topic(t, "orders")
	group := kototest.Group(t, "payments")
	dlq := topics.DeadLetter(group) // the default dead-letter topic
	env.provision(t, dlq)

	msgs := []*message.Message{
		orderMessage(`{"id":"ok1"}`),
		orderMessage(`{"id":`), // does not decode
		orderMessage(`{"id":"ok2"}`),
		orderMessage(`{"id":"p","kind":"permanent"}`),
		orderMessage(`{"id":"ok3"}`),
		orderMessage(`{"id":"x","kind":"panic"}`),
		orderMessage(`{"id":"ok4"}`),
		orderMessage(`{"id":"f","kind":"flaky"}`),
		orderMessage(`{"id":"ok5"}`),
	}
	msgs[1].Metadata.Set(correlation.MetadataKey, "corr-poison")
	poison := map[string]struct {
		index              int
		errType, class, at string
	}{
		msgs[1].UUID: {1, "*json.SyntaxError", "poison", "1"},
		msgs[3].UUID: {3, "*errors.errorString", "poison", "1"},
		msgs[5].UUID: {5, "*middleware.PanicError", "poison", "1"},
		msgs[7].UUID: {7, "*errors.errorString", "retryable", "3"},
	}
	env.publish(t, topic, msgs...)

	mws := defaultsChain(t, middleware.Config{
		Publisher: env.pub,
		Store:     memoryStore(t),
		Logger:    slog.New(slog.DiscardHandler),
		DeadLetter: middleware.DeadLetterConfig{
			MaxAttempts: 3,
			Backoff:     koto.Backoff{InitialInterval: fastBackoff.initial, MaxInterval: fastBackoff.max},
		},
	})
	processed := new(kototest.Counter)
	var seq []string
	stop := env.runRouter(t, handlerSpec{name: group, topic: topic, middlewares: mws, handle: handleOrder(processed, &seq)})
	kototest.WaitFor(t, "ok5 to be processed", func() bool { return processed.Get("ok5") == 1 })
	stop()

	if got := fmt.Sprint(seq); got != "[ok1 ok2 ok3 ok4 ok5]" {
		t.Errorf("processed %s, want [ok1 ok2 ok3 ok4 ok5] in order", got)
	}
	for _, dl := range env.collect(t, dlq, len(poison)) {
		want, ok := poison[dl.UUID]
		if !ok {
			t.Errorf("unexpected dead letter %s %q", dl.UUID, dl.Payload)
			continue
		}
		delete(poison, dl.UUID)
		checkDeadLetter(t, dl, msgs[want.index], map[string]string{
			dlErrorType:      want.errType,
			dlErrorClass:     want.class,
			dlAttempts:       want.at,
			dlOriginalTopic:  topic,
			dlConsumerGroup:  group,
			dlHandler:        group,
			dlOriginalOffset: strconv.Itoa(want.index),
		})
	}
	for id := range poison {
		t.Errorf("message %s was not dead-lettered", id)
	}
}

// checkDeadLetter checks that dl is orig with every dead-letter key filled
// in and the given values.
func checkDeadLetter(t *testing.T, dl, orig *message.Message, want map[string]string) {
	t.Helper()
	if string(dl.Payload) != string(orig.Payload) {
		t.Errorf("dead letter %s payload %q, want %q", dl.UUID, dl.Payload, orig.Payload)
	}
	for k, v := range orig.Metadata {
		if dl.Metadata.Get(k) != v {
			t.Errorf("dead letter %s lost metadata %s=%q (has %q)", dl.UUID, k, v, dl.Metadata.Get(k))
		}
	}
	for _, k := range []string{
		dlReason, dlErrorType, dlErrorClass,
		dlOriginalTopic, dlOriginalPartition, dlOriginalOffset,
		dlConsumerGroup, dlHandler, dlAttempts,
		dlFailedAt,
	} {
		if dl.Metadata.Get(k) == "" {
			t.Errorf("dead letter %s has no %s", dl.UUID, k)
		}
	}
	for k, v := range want {
		if got := dl.Metadata.Get(k); got != v {
			t.Errorf("dead letter %s: %s = %q, want %q", dl.UUID, k, got, v)
		}
	}
	if _, err := strconv.Atoi(dl.Metadata.Get(dlOriginalPartition)); err != nil {
		t.Errorf("dead letter %s: partition %q: %v", dl.UUID, dl.Metadata.Get(dlOriginalPartition), err)
	}
	if _, err := time.Parse(time.RFC3339Nano, dl.Metadata.Get(dlFailedAt)); err != nil {
		t.Errorf("dead letter %s: failed_at: %v", dl.UUID, err)
	}
	if correlation.FromMessage(dl) == "" {
		t.Errorf("dead letter %s has no correlation ID", dl.UUID)
	}
	if id := correlation.FromMessage(orig); id != "" && correlation.FromMessage(dl) != id {
		t.Errorf("dead letter %s: correlation ID %q, want %q", dl.UUID, correlation.FromMessage(dl), id)
	}
}

// TestDeadLetterTooLargeIsSentWithoutPayload: a poison message that fits
// the dead-letter publisher's limit only without the dead letter's
// metadata (here sarama's Producer.MaxMessageBytes, refused before it
// reaches Kafka) is dead-lettered without its payload and its header of
// more than 1 KiB, saying why, and the partition moves on; nacked, it
// would be refused on every redelivery. Its other headers, its UUID and
// its key stay, so that it can still be found.
func TestDeadLetterTooLargeIsSentWithoutPayload(t *testing.T) {
	env := newKafkaEnv(t)
	topic := env.topic(t, "orders")
	group := kototest.Group(t, "payments")
	dlq := topics.DeadLetter(group)
	env.provision(t, dlq)
	const limit = 8 << 10
	dlPub := kototest.NewPublisher(t, broker.Config{Brokers: env.brokers, Sarama: func(c *sarama.Config) {
		c.Producer.MaxMessageBytes = limit
	}})
	big := orderMessage(`{"id":"` + strings.Repeat("x", limit-400)) // does not decode
	big.Metadata.Set(correlation.MetadataKey, "corr-big")
	big.Metadata.Set("note", strings.Repeat("n", 2000))
	env.publish(t, topic, big, orderMessage(`{"id":"after"}`))

	mws := defaultsChain(t, middleware.Config{Publisher: dlPub, Logger: slog.New(slog.DiscardHandler)})
	processed := new(kototest.Counter)
	var seq []string
	stop := env.runRouter(t, handlerSpec{name: group, topic: topic, middlewares: mws, handle: handleOrder(processed, &seq)})
	kototest.WaitFor(t, "the message after it to be processed", func() bool { return processed.Get("after") == 1 })
	stop()

	dl := env.collect(t, dlq, 1)[0]
	dropped := dl.Metadata.Get(dlDropped)
	if dl.UUID != big.UUID || len(dl.Payload) != 0 || !strings.Contains(dropped, "too large") {
		t.Fatalf("dead letter %s with %d bytes, dropped %q; want %s without payload, saying it was too large", dl.UUID, len(dl.Payload), dropped, big.UUID)
	}
	for k, want := range map[string]string{
		dlErrorClass:                 "poison",
		dlOriginalTopic:              topic,
		dlOriginalOffset:             "0",
		correlation.MetadataKey:      "corr-big",
		koto.PartitionKeyMetadataKey: "one-partition",
		"tenant":                     "acme",
		"note":                       "",
	} {
		if got := dl.Metadata.Get(k); got != want {
			t.Errorf("dead letter %s = %q, want %q", k, got, want)
		}
	}
	if r := dl.Metadata.Get(dlReason); r == "" || len(r) > 1024 {
		t.Errorf("dead letter reason of %d bytes, want a reason of at most 1 KiB", len(r))
	}
}
