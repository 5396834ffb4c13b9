package broker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestPublishHonoursTheMessageContext: the broker leaves every produce to
// a topic unanswered. Publish of a message whose context ends while its
// produce is held returns then; the producer retries the record once its read timeout
// passes, and Close waits until it is written.
// A message whose context has ended is not sent. Publish after Close
// returns ErrPublisherClosed.
func TestPublishHonoursTheMessageContext(t *testing.T) {
	kototest.VerifyNoLeaks(t)
	b := kototest.Embedded(t)
	brokers := b.Addrs()
	topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "held")
	pub, err := broker.NewPublisher(broker.Config{Brokers: brokers, Sarama: func(sc *sarama.Config) {
		sc.Net.ReadTimeout = time.Second
	}})
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	stall := kototest.StallRequests(t, b, kmsg.Produce, topic)

	late := message.NewMessage(watermill.NewUUID(), []byte("late"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the context ends once the produce is held, not at a time
		select {
		case <-stall.Stalled():
		case <-ctx.Done():
		}
		cancel()
	}()
	late.SetContext(ctx)
	done := make(chan error, 1)
	go func() { done <- pub.Publish(topic, late) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Publish under a stalled produce: %v, want context.Canceled", err)
		}
	case <-time.After(kototest.DefaultTimeout):
		t.Fatal("Publish did not return when its message's context ended")
	}

	gone := message.NewMessage(watermill.NewUUID(), []byte("gone"))
	cancelled, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	gone.SetContext(cancelled)
	if err := pub.Publish(topic, gone); !errors.Is(err, context.Canceled) {
		t.Errorf("Publish with an ended context: %v, want context.Canceled", err)
	}

	stall.Release()
	if err := pub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := kototest.Records(t, brokers, topic); n != 1 {
		t.Errorf("%d records written, want the late one alone", n)
	}
	err = pub.Publish(topic, message.NewMessage(watermill.NewUUID(), nil))
	if !errors.Is(err, broker.ErrPublisherClosed) || !errors.Is(err, sarama.ErrShuttingDown) {
		t.Errorf("Publish after Close: %v, want ErrPublisherClosed, which is sarama.ErrShuttingDown", err)
	}
	if err := pub.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestPublisherLosesNoAcknowledgedMessageAcrossEpochBumps: the broker
// rejects some produce requests with OUT_OF_ORDER_SEQUENCE_NUMBER, as after
// it lost the idempotent producer's state, while messages are published to
// every partition at once. Each rejection makes the producer bump its epoch
// and start its sequence numbers again; every message whose Publish
// returned nil must be in the topic.
func TestPublisherLosesNoAcknowledgedMessageAcrossEpochBumps(t *testing.T) {
	kototest.VerifyNoLeaks(t)
	b := kototest.Embedded(t)
	brokers := b.Addrs()
	topic := kototest.NewTopic(t, provisionCfg(brokers, 6), "epochs")
	pub := kototest.NewPublisher(t, broker.Config{Brokers: brokers})

	var produces, rejected atomic.Int64
	const rejections = 40
	b.Cluster().Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.OutOfOrderSequenceNumber, Count: -1,
		When: func(kmsg.Request) bool {
			if produces.Add(1)%3 != 0 || rejected.Load() >= rejections {
				return false
			}
			rejected.Add(1)
			return true
		},
	})

	const publishers, each = 12, 25
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range each {
				msg := message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf("%d-%d", p, i)))
				msg.Metadata.Set(koto.PartitionKeyMetadataKey, fmt.Sprintf("key-%d-%d", p, i))
				for {
					err := pub.Publish(topic, msg)
					if err == nil {
						break
					}
					if !errors.Is(err, sarama.ErrOutOfOrderSequenceNumber) {
						t.Errorf("Publish: %v, want nil or the injected rejection", err)
						return
					}
				}
				mu.Lock()
				acked[msg.UUID] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if rejected.Load() == 0 {
		t.Fatal("the broker rejected no produce request")
	}

	// Every Publish has returned, so the log holds all it will.
	records := kototest.Records(t, brokers, topic)
	var read int64
	written := map[string]bool{}
	kototest.Watch(t, brokers, topic, func(m *message.Message) {
		mu.Lock()
		defer mu.Unlock()
		read++
		written[m.UUID] = true
	})
	kototest.WaitFor(t, fmt.Sprintf("the %d records of %s", records, topic), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return read >= records
	})
	mu.Lock()
	defer mu.Unlock()
	var lost int
	for id := range acked {
		if !written[id] {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged messages are not in the topic (%d records, %d produce requests rejected)",
			lost, len(acked), records, rejected.Load())
	}
}

// TestProvisionTopicsEndsWithItsContext: the broker leaves the topic
// creation unanswered; cancelling the context ends ProvisionTopics at once.
func TestProvisionTopicsEndsWithItsContext(t *testing.T) {
	kototest.VerifyNoLeaks(t)
	b := kototest.Embedded(t)
	topic := kototest.Topic(t, "held")
	stall := kototest.StallRequests(t, b, kmsg.CreateTopics, topic)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- broker.ProvisionTopics(ctx, broker.Config{Brokers: b.Addrs()}, topic) }()
	select {
	case <-stall.Stalled():
	case <-time.After(kototest.DefaultTimeout):
		t.Fatal("the topic creation never reached the broker")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ProvisionTopics cancelled: %v, want context.Canceled", err)
		}
	case <-time.After(kototest.DefaultTimeout):
		t.Fatal("ProvisionTopics did not end with its context")
	}
}
