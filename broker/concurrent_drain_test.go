package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestCloseDrainsMessagesInFlight receives messages of a one-partition
// topic and starts Close before acking them: what is acked within
// Config.DrainTimeout is committed, and the context of a message still
// unacked at its end is cancelled. Without a drain nothing would be
// committed. One at a time, the message in flight is offset 0; with
// Concurrency 16, all ten are in flight and offset 5 is left unacked.
func TestCloseDrainsMessagesInFlight(t *testing.T) {
	for name, concurrency := range map[string]int{"one at a time": 0, "concurrent": 16} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			brokers := kototest.Brokers(t)
			topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "drain")
			kototest.Produce(t, brokers, spread(topic, 1, 10), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			cfg := broker.Config{Brokers: brokers, ConsumerGroup: kototest.Group(t, "drain"), Concurrency: concurrency, DrainTimeout: time.Second}
			sub, err := broker.NewSubscriber(cfg)
			if err != nil {
				t.Fatalf("NewSubscriber: %v", err)
			}
			msgs := kototest.Subscribe(t, sub, topic)
			inFlight, want, hold := 1, int64(1), ""
			if concurrency > 1 {
				inFlight, want, hold = 10, 5, "0/5"
			}
			var got []*message.Message
			for range inFlight {
				got = append(got, kototest.Receive(t, msgs, "message"))
			}
			closed := make(chan error, 1)
			go func() { closed <- sub.Close() }()
			// Let Close begin, so that the acks come during the drain: were
			// they earlier, the test would pass without a drain (it cannot
			// fail with one).
			time.Sleep(200 * time.Millisecond)
			var held *message.Message
			for _, m := range got {
				if string(m.Payload) == hold {
					held = m
					continue
				}
				m.Ack()
			}
			if err := kototest.Receive(t, closed, "end of Close"); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if held != nil && held.Context().Err() == nil {
				t.Error("the context of the message left unacked is not cancelled after Close")
			}
			if got := kototest.Committed(t, brokers, cfg.ConsumerGroup, topic); got != want {
				t.Errorf("committed offset %d after Close, want %d: the messages acked while it drained", got, want)
			}
		})
	}
}

// TestRevokedPartitionIsNotAckedIntoTheNewOwner holds offset 0 of both
// partitions of a topic in a first subscriber, which acks the rest, until
// a second one joins the group and gets one of the partitions with its
// offset 0 again. The first subscriber's ack of its copy, now late, is not
// committed: the committed offset of the moved partition stays at 0 while
// the new owner holds it, and moves on when it acks.
func TestRevokedPartitionIsNotAckedIntoTheNewOwner(t *testing.T) {
	const n = 50
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 2), "revoke")
	kototest.Produce(t, brokers, spread(topic, 2, n), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cfg := broker.Config{Brokers: brokers, ConsumerGroup: kototest.Group(t, "revoke"), Concurrency: 8, DrainTimeout: 200 * time.Millisecond}

	old := newHolder("0/0", "1/0")
	old.serve(kototest.Subscribe(t, kototest.NewSubscriber(t, cfg), topic))
	kototest.WaitFor(t, "the first subscriber to ack all but the held messages", func() bool { return old.ackedCount() == 2*n-2 })
	expectCommitted(t, brokers, cfg.ConsumerGroup, topic, map[int32]int64{0: 0, 1: 0})

	fresh := newHolder("0/0", "1/0")
	fresh.serve(kototest.Subscribe(t, kototest.NewSubscriber(t, cfg), topic))
	moved := fresh.firstHeld(t, "the second subscriber to get a partition's held message")
	old.release(t, moved)
	p := int32(moved[0] - '0')
	expectCommitted(t, brokers, cfg.ConsumerGroup, topic, map[int32]int64{p: 0, 1 - p: 0})
	fresh.release(t, moved)
	kototest.WaitFor(t, fmt.Sprintf("partition %d committed to its end", p), func() bool {
		return committedAt(t, brokers, cfg.ConsumerGroup, topic)[p] == n
	})
}

// TestCooperativeRevokeOfAPartitionReadNoFurther holds offset 0 of both
// partitions of a topic in a subscriber of the cooperative-sticky
// strategy, until each partition reads no further above its mark. A
// second subscriber then joins: the first gives up one partition, whose
// revoke only the closing of its claim tells, within the rebalance and
// without ending its session (its other held message stays live), and
// the second gets that partition's offset 0 again.
func TestCooperativeRevokeOfAPartitionReadNoFurther(t *testing.T) {
	const n, buffer = 300, 10
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 2), "coop")
	kototest.Produce(t, brokers, spread(topic, 2, n), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cfg := broker.Config{
		Brokers: brokers, ConsumerGroup: kototest.Group(t, "coop"), Concurrency: 8, PartitionBufferRecords: buffer, DrainTimeout: 200 * time.Millisecond,
		Sarama: func(sc *sarama.Config) {
			sc.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
			sc.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond // members hear of each of the two rebalances at a heartbeat
		},
	}
	old := newHolder("0/0", "1/0")
	old.serve(kototest.Subscribe(t, kototest.NewSubscriber(t, cfg), topic))
	kototest.WaitFor(t, "both partitions to read no further", func() bool { return old.ackedCount() == 2*(10*buffer-1) })

	fresh := newHolder("0/0", "1/0")
	fresh.serve(kototest.Subscribe(t, kototest.NewSubscriber(t, cfg), topic))
	moved := fresh.firstHeld(t, "the second subscriber to get a partition's held message")
	kept := map[string]string{"0/0": "1/0", "1/0": "0/0"}[moved]
	old.stillLive(t, kept, "the held message of the partition the first subscriber kept was cancelled: its session ended")
	fresh.release(t, moved)
	old.release(t, kept)
	kototest.WaitCommitted(t, brokers, cfg.ConsumerGroup, topic, 2*n)
}
