package kototest

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
)

// Receive returns the next value of ch, failing t when none comes within
// [DefaultTimeout] or ch is closed; what names it in the failure.
func Receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(DefaultTimeout)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("kototest: no %s: the channel is closed", what)
		}
		return v
	case <-timer.C:
		t.Fatalf("kototest: no %s within %v", what, DefaultTimeout)
		panic("unreachable")
	}
}

// Subscribe subscribes sub to topic until t finishes.
func Subscribe(t testing.TB, sub message.Subscriber, topic string) <-chan *message.Message {
	t.Helper()
	msgs, err := sub.Subscribe(Context(t), topic)
	if err != nil {
		t.Fatalf("kototest: subscribe to %s: %v", topic, err)
	}
	return msgs
}

// AckN receives n messages of msgs, acking each, within [DefaultTimeout] for
// each.
func AckN(t testing.TB, msgs <-chan *message.Message, n int) []*message.Message {
	t.Helper()
	got := make([]*message.Message, 0, n)
	for len(got) < n {
		m := Receive(t, msgs, "message")
		m.Ack()
		got = append(got, m)
	}
	return got
}

// Payloads returns the payloads of msgs as strings.
func Payloads(msgs []*message.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Payload)
	}
	return out
}

// Watch reads topic in a fresh consumer group, from its oldest offset, and
// calls handle with each message, acked, on a goroutine of its own, until
// t finishes. handle must not block.
func Watch(t testing.TB, brokers []string, topic string, handle func(*message.Message)) {
	t.Helper()
	sub := NewSubscriber(t, broker.Config{Brokers: brokers, ConsumerGroup: Group(t, "watch")})
	ctx, cancel := context.WithCancel(context.Background())
	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		cancel()
		t.Fatalf("kototest: subscribe to %s: %v", topic, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for msg := range msgs {
			msg.Ack()
			handle(msg)
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = sub.Close()
		<-done
	})
}
