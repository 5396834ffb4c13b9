package middleware_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/middleware"
)

const unitDLQ = "unit.dlq"

// unitChannel is Watermill's in-process pubsub with a subscriber on
// unitDLQ that records every dead letter. Publish returns once the
// subscriber has recorded the message, so what deadLetters returns is
// complete without waiting.
type unitChannel struct {
	*gochannel.GoChannel
	mu  sync.Mutex
	got []*message.Message
}

func newGoChannel(t *testing.T) *unitChannel {
	t.Helper()
	gc := &unitChannel{GoChannel: gochannel.NewGoChannel(gochannel.Config{BlockPublishUntilSubscriberAck: true}, nil)}
	ch, err := gc.Subscribe(context.Background(), unitDLQ)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range ch {
			gc.mu.Lock()
			gc.got = append(gc.got, m)
			gc.mu.Unlock()
			m.Ack()
		}
	}()
	t.Cleanup(func() {
		_ = gc.Close()
		<-done
	})
	return gc
}

// deadLetters returns what was published to unitDLQ so far.
func deadLetters(t *testing.T, gc *unitChannel) []*message.Message {
	t.Helper()
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return append([]*message.Message(nil), gc.got...)
}

func deadLetterUnit(t *testing.T, gc *unitChannel, cfg middleware.DeadLetterConfig, h message.HandlerFunc) message.HandlerFunc {
	t.Helper()
	cfg.Topic = unitDLQ
	cfg.Backoff = koto.Backoff{InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond}
	m, err := middleware.DeadLetter(gc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m(h)
}

// TestOutageIsNeverDeadLettered: an outage is retried until the message's
// context ends, then nacked; nothing reaches the dead-letter topic.
func TestOutageIsNeverDeadLettered(t *testing.T) {
	gc := newGoChannel(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	h := deadLetterUnit(t, gc, middleware.DeadLetterConfig{MaxAttempts: 2}, func(*message.Message) ([]*message.Message, error) {
		calls++
		if calls == 20 {
			cancel() // the router closes
		}
		return nil, koto.Outage(errors.New("database unreachable"))
	})
	msg := message.NewMessage("outage", nil)
	msg.SetContext(ctx)
	if _, err := h(msg); err == nil {
		t.Fatal("an outage that never ended was acked")
	}
	if calls != 20 {
		t.Errorf("handler ran %d times, want 20 (retried until the context ended)", calls)
	}
	if dl := deadLetters(t, gc); len(dl) != 0 {
		t.Errorf("%d dead letters for an outage", len(dl))
	}
}

// TestOutagesDoNotCountAsAttempts: five outage failures, then a retryable
// error with MaxAttempts 2: the message is dead-lettered after 7 calls.
func TestOutagesDoNotCountAsAttempts(t *testing.T) {
	gc := newGoChannel(t)
	calls := 0
	h := deadLetterUnit(t, gc, middleware.DeadLetterConfig{MaxAttempts: 2}, func(*message.Message) ([]*message.Message, error) {
		calls++
		if calls <= 5 {
			return nil, koto.Outage(errors.New("database unreachable"))
		}
		return nil, errors.New("bug")
	})
	if _, err := h(message.NewMessage("mixed", nil)); err != nil {
		t.Fatalf("dead-lettered message not acked: %v", err)
	}
	dl := deadLetters(t, gc)
	if calls != 7 || len(dl) != 1 || dl[0].Metadata.Get(dlAttempts) != "7" {
		t.Fatalf("calls %d, dead letters %d; want 7 calls and one dead letter with attempts 7", calls, len(dl))
	}
	if dl[0].Metadata.Get(dlOriginalPartition) != "" {
		t.Error("partition set for a message that did not come from Kafka")
	}
}

// TestMaxElapsedTimeEndsRetries: with an elapsed-time budget smaller than
// the first backoff, the first retryable failure is dead-lettered.
func TestMaxElapsedTimeEndsRetries(t *testing.T) {
	gc := newGoChannel(t)
	calls := 0
	h := deadLetterUnit(t, gc, middleware.DeadLetterConfig{MaxAttempts: 100, MaxElapsedTime: time.Nanosecond}, func(*message.Message) ([]*message.Message, error) {
		calls++
		return nil, errors.New("bug")
	})
	if _, err := h(message.NewMessage("slow", nil)); err != nil || calls != 1 {
		t.Fatalf("err %v after %d calls; want dead-lettered after 1", err, calls)
	}
}

// TestNoConsumerGroupNacks: without a handler name in the context and
// without a configured topic there is nowhere to dead-letter: nack.
func TestNoConsumerGroupNacks(t *testing.T) {
	gc := newGoChannel(t)
	m, err := middleware.DeadLetter(gc, middleware.DeadLetterConfig{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m(func(*message.Message) ([]*message.Message, error) {
		return nil, koto.Poison(errors.New("bad"))
	})(message.NewMessage("nowhere", nil))
	if !errors.Is(err, koto.ErrInvalidConfig) {
		t.Fatalf("poison without a dead-letter topic: err %v, want a nack with ErrInvalidConfig", err)
	}
}

// TestRetrySucceeds: a handler that fails twice and then succeeds returns
// its messages and dead-letters nothing.
func TestRetrySucceeds(t *testing.T) {
	gc := newGoChannel(t)
	calls, leaked := 0, 0
	out := message.NewMessage("out", nil)
	h := deadLetterUnit(t, gc, middleware.DeadLetterConfig{}, func(msg *message.Message) ([]*message.Message, error) {
		calls++
		if msg.Context().Value(attemptKey{}) != nil {
			leaked++ // the previous attempt's context
		}
		msg.SetContext(context.WithValue(msg.Context(), attemptKey{}, calls)) // a handler may replace it
		if calls < 3 {
			return nil, errors.New("flaky")
		}
		return []*message.Message{out}, nil
	})
	produced, err := h(message.NewMessage("flaky", nil))
	if err != nil || len(produced) != 1 || produced[0] != out || calls != 3 {
		t.Fatalf("got %v, %v after %d calls", produced, err, calls)
	}
	if leaked != 0 {
		t.Errorf("%d attempts saw the context of the attempt before", leaked)
	}
	if dl := deadLetters(t, gc); len(dl) != 0 {
		t.Errorf("%d dead letters for a message that succeeded", len(dl))
	}
}

type attemptKey struct{}

// TestInvalidRecordIsDeadLetteredWithoutHandler: a message that its record
// mapping marked invalid (koto.InvalidRecordMetadataKey) goes to the
// dead-letter topic at once as poison, with the mapping's reason, and the
// handler never sees it.
func TestInvalidRecordIsDeadLetteredWithoutHandler(t *testing.T) {
	gc := newGoChannel(t)
	calls := 0
	h := deadLetterUnit(t, gc, middleware.DeadLetterConfig{}, func(*message.Message) ([]*message.Message, error) {
		calls++
		return nil, nil
	})
	msg := message.NewMessage("", []byte("{}"))
	msg.Metadata.Set(koto.InvalidRecordMetadataKey, "CloudEvents: required attribute missing or empty: id")
	if _, err := h(msg); err != nil {
		t.Fatalf("an invalid record was nacked: %v", err)
	}
	dl := deadLetters(t, gc)
	if calls != 0 || len(dl) != 1 {
		t.Fatalf("handler ran %d times and %d dead letters, want 0 and 1", calls, len(dl))
	}
	md := dl[0].Metadata
	if reason := md.Get("dead_letter_reason"); !strings.Contains(reason, "missing or empty: id") || md.Get("dead_letter_error_class") != "poison" {
		t.Errorf("dead letter reason %q, class %q: want the mapping's reason, poison", reason, md.Get("dead_letter_error_class"))
	}
}

// TestRetryAfterWithoutParkingIsRetryable: a koto.RetryAfter error, where
// nothing parks, is retried in place and dead-lettered after its
// attempts, as any retryable error.
func TestRetryAfterWithoutParkingIsRetryable(t *testing.T) {
	gc := newGoChannel(t)
	calls := 0
	h := deadLetterUnit(t, gc, middleware.DeadLetterConfig{MaxAttempts: 3}, func(*message.Message) ([]*message.Message, error) {
		calls++
		return nil, koto.RetryAfter(errors.New("rate limited"), time.Hour)
	})
	if _, err := h(message.NewMessage("later", nil)); err != nil {
		t.Fatalf("dead-lettered message not acked: %v", err)
	}
	if dl := deadLetters(t, gc); calls != 3 || len(dl) != 1 || dl[0].Metadata.Get(dlAttempts) != "3" {
		t.Fatalf("calls %d, dead letters %d; want 3 calls and one dead letter", calls, len(dl))
	}
}

// TestAnotherGroupsParkedMessageIsSkipped: a message that another group
// parked, come back through the topic, is acked without a handler call;
// one of this group's is handled, and its dead letter leaves the parking's
// metadata out, where nothing parks.
func TestAnotherGroupsParkedMessageIsSkipped(t *testing.T) {
	gc := newGoChannel(t)
	calls := 0
	h := deadLetterUnit(t, gc, middleware.DeadLetterConfig{MaxAttempts: 1, ConsumerGroup: func(*message.Message) string { return "mine" }},
		func(*message.Message) ([]*message.Message, error) {
			calls++
			return nil, errors.New("bug")
		})
	other := message.NewMessage("other", nil)
	other.Metadata.Set(middleware.ParkedGroupKey, "theirs")
	other.Metadata.Set(middleware.ParkedIDKey, "01900000-0000-7000-8000-000000000001")
	if _, err := h(other); err != nil || calls != 0 {
		t.Fatalf("another group's parked message: err %v, %d calls; want acked without a call", err, calls)
	}
	own := message.NewMessage("own", nil)
	own.Metadata.Set(middleware.ParkedGroupKey, "mine")
	own.Metadata.Set(middleware.ParkedIDKey, "01900000-0000-7000-8000-000000000002")
	if _, err := h(own); err != nil || calls != 1 {
		t.Fatalf("own parked message: err %v, %d calls; want dead-lettered after a call", err, calls)
	}
	dl := deadLetters(t, gc)
	if len(dl) != 1 || dl[0].Metadata.Get(middleware.ParkedIDKey) != "" || dl[0].Metadata.Get(middleware.ParkedGroupKey) != "" {
		t.Fatalf("dead letters %v; want one, without the parking's metadata", dl)
	}
}
