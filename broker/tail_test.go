package broker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

// TestTailReaderReadsOnlyNewMessages publishes before and after Start, with
// keys hashed over the partitions: the reader gets exactly the later
// messages.
func TestTailReaderReadsOnlyNewMessages(t *testing.T) {
	ctx := kototest.Context(t)
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 4), "tail")
	pub := kototest.NewPublisher(t, broker.Config{Brokers: brokers})
	for i := range 8 {
		publish(t, pub, topic, fmt.Sprint("key-", i), fmt.Sprint("old-", i))
	}

	got := make(chan *message.Message, 16)
	r := startTailReader(ctx, t, broker.Config{Brokers: brokers}, topic, func(m *message.Message) { got <- m })
	defer closeTailReader(t, r)
	var want []string
	for i := range 8 {
		want = append(want, fmt.Sprint("new-", i))
		publish(t, pub, topic, fmt.Sprint("key-", i), want[i])
	}
	var received []string
	for len(received) < len(want) {
		received = append(received, string(kototest.Receive(t, got, "message").Payload))
	}
	slices.Sort(received)
	if !slices.Equal(received, want) {
		t.Fatalf("tail reader received %v, want only the messages published after Start %v", received, want)
	}
}

func TestTailReaderLifecycle(t *testing.T) {
	brokers := kototest.Brokers(t)
	noop := func(*message.Message) {}
	if _, err := broker.NewTailReader(broker.Config{Brokers: brokers}, "bad topic", noop); !errors.Is(err, topics.ErrInvalid) || !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("invalid topic: %v, want topics.ErrInvalid and ErrInvalidConfig", err)
	}
	if _, err := broker.NewTailReader(broker.Config{Brokers: brokers}, "t", nil); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("nil handle: %v, want ErrInvalidConfig", err)
	}
	if _, err := broker.NewTailReader(broker.Config{}, "t", noop); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("no brokers: %v, want ErrNoBrokers", err)
	}

	r, err := broker.NewTailReader(broker.Config{Brokers: brokers}, kototest.Topic(t, "tail-life"), noop)
	if err != nil {
		t.Fatalf("NewTailReader: %v", err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Start(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with a cancelled context: %v, want context.Canceled", err)
	}
	if err := r.Start(kototest.Context(t)); err != nil {
		t.Fatalf("Start after an abandoned start: %v", err)
	}
	if err := r.Start(kototest.Context(t)); err == nil {
		t.Error("second Start succeeded, want an error")
	}
	for i := range 2 {
		if err := r.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	if err := r.Start(kototest.Context(t)); err == nil {
		t.Error("Start after Close succeeded, want an error")
	}
}
