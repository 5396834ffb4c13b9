package broker_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestTailReaderResumesARecreatedTopic: the reader's topic is deleted and
// created again, so that its offset is out of range. While the broker
// refuses the offset lookups that resuming needs, Err wraps ErrReaderDown
// and the cause; once it answers them again, the reader resumes, logs it,
// Err is nil, and it reads every message published since the recreation,
// those published while it was down included.
func TestTailReaderResumesARecreatedTopic(t *testing.T) {
	kototest.VerifyNoLeaks(t)
	b := kototest.Embedded(t)
	brokers := b.Addrs()
	ctx := kototest.Context(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "recreated")
	logs := &kototest.Buffer{}
	cfg := broker.Config{Brokers: brokers, ReconnectRetrySleep: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	got := make(chan *message.Message, 64)
	r, err := broker.NewTailReader(cfg, topic, func(m *message.Message) { got <- m })
	if err != nil {
		t.Fatalf("NewTailReader: %v", err)
	}
	if err := r.Err(); !errors.Is(err, broker.ErrReaderDown) {
		t.Errorf("Err before Start: %v, want ErrReaderDown", err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer closeTailReader(t, r)
	if err := r.Err(); err != nil {
		t.Fatalf("Err after Start: %v", err)
	}
	publish(t, kototest.NewPublisher(t, cfg), topic, "", "before-1", "before-2", "before-3")
	if p := kototest.Payloads(kototest.AckN(t, got, 3)); !slices.Equal(p, []string{"before-1", "before-2", "before-3"}) {
		t.Fatalf("read %v before the recreation", p)
	}

	fault := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: topic, Count: -1})
	recreateTopic(ctx, t, brokers, topic)
	pub := kototest.NewPublisher(t, cfg) // the first one's producer state is the old topic's
	publish(t, pub, topic, "", "after-1")
	kototest.WaitFor(t, "the reader to report the partition it cannot read", func() bool { return r.Err() != nil })
	if err := r.Err(); !errors.Is(err, broker.ErrReaderDown) || !errors.Is(err, sarama.ErrOffsetOutOfRange) {
		t.Errorf("Err while the partition cannot be resumed: %v, want ErrReaderDown and sarama.ErrOffsetOutOfRange", err)
	}
	publish(t, pub, topic, "", "after-2")
	fault.Remove()
	kototest.WaitFor(t, "the reader to resume", func() bool { return r.Err() == nil })
	publish(t, pub, topic, "", "after-3")
	if p := kototest.Payloads(kototest.AckN(t, got, 3)); !slices.Equal(p, []string{"after-1", "after-2", "after-3"}) {
		t.Errorf("read %v after the recreation, want after-1, after-2 and after-3", p)
	}
	if !strings.Contains(logs.String(), `msg="Tail reader resumed reading a partition`) {
		t.Errorf("no log line on the recovery; logged:\n%s", logs)
	}
}

// TestTailReaderStartEndsWithCloseAndContext: the broker leaves the
// reader's offset lookups unanswered, so Start hangs. A Start whose context
// ends returns, and Close ends another Start and returns, leaving nothing
// running.
func TestTailReaderStartEndsWithCloseAndContext(t *testing.T) {
	kototest.VerifyNoLeaks(t)
	b := kototest.Embedded(t)
	brokers := b.Addrs()
	topic := kototest.NewTopic(t, provisionCfg(brokers, 2), "hanging")
	r, err := broker.NewTailReader(broker.Config{Brokers: brokers}, topic, func(*message.Message) {})
	if err != nil {
		t.Fatalf("NewTailReader: %v", err)
	}
	stall := kototest.StallRequests(t, b, kmsg.ListOffsets, topic)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the context ends once the lookup is held, not at a time
		select {
		case <-stall.Stalled():
		case <-ctx.Done():
		}
		cancel()
	}()
	if err := within(t, "Start whose context ends", func() error { return r.Start(ctx) }); !errors.Is(err, context.Canceled) {
		t.Errorf("Start after its context ended: %v, want context.Canceled", err)
	}
	if stall.Count() != 1 {
		t.Fatalf("%d offset lookups reached the broker, want 1", stall.Count())
	}
	started := make(chan error, 1)
	go func() { started <- r.Start(context.Background()) }()
	select {
	case <-stall.Stalled():
	case <-time.After(kototest.DefaultTimeout):
		t.Fatal("the second Start's offset lookup never reached the broker")
	}
	if err := within(t, "Close during Start", r.Close); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := within(t, "Start ended by Close", func() error { return <-started }); err == nil {
		t.Error("Start ended by Close succeeded")
	}
}

// recreateTopic deletes topic and provisions it again.
func recreateTopic(ctx context.Context, t *testing.T, brokers []string, topic string) {
	t.Helper()
	resp, err := kototest.Admin(t, brokers).DeleteTopics(ctx, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete %s: %v", topic, err)
	}
	if err := broker.ProvisionTopics(ctx, provisionCfg(brokers, 1), topic); err != nil {
		t.Fatalf("create %s again: %v", topic, err)
	}
}

// within runs f and returns its result, or fails the test when f takes
// more than kototest.DefaultTimeout.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(kototest.DefaultTimeout):
		t.Fatalf("%s did not return within %s", what, kototest.DefaultTimeout)
		return nil
	}
}
