package broker_test

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/twmb/franz-go/pkg/kgo"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestConcurrentPartitionsShareTheSlots: on 8 partitions with Concurrency
// 32, partition 0's 2 000 records (distinct keys) block in their handlers;
// partitions 1–7's 1 000 records each, written after partition 0's had
// taken what slots they could, are all handled meanwhile, each key in
// order. Once released, partition 0's are handled too, and the blocked
// partition never held more slots than the rule gives it: its own
// 32/(2·8) = 2 and the 16 shared.
func TestConcurrentPartitionsShareTheSlots(t *testing.T) {
	const partitions, concurrency, slow, fast, keysPerPartition = 8, 32, 2000, 1000, 50
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, partitions), "fair")
	manual := kgo.RecordPartitioner(kgo.ManualPartitioner())

	slowRecs := make([]*kgo.Record, slow)
	for i := range slowRecs {
		slowRecs[i] = kototest.Record(topic, watermill.NewUUID(), "slow"+strconv.Itoa(i), []byte("slow"+strconv.Itoa(i)+"/0"))
	}
	kototest.Produce(t, brokers, slowRecs, manual)

	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after the release below
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	var slowInFlight, slowPeak atomic.Int64
	order := newKeyOrder(t)
	cfg := broker.Config{Brokers: brokers, ConsumerGroup: kototest.Group(t, "fair"), Concurrency: concurrency}
	msgs := kototest.Subscribe(t, kototest.NewSubscriber(t, cfg), topic)
	go func() {
		for msg := range msgs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key, seq := parseKeyed(t, msg)
				order.begin(key)
				if pos, _ := koto.PositionFromContext(msg.Context()); pos.Partition == 0 {
					n := slowInFlight.Add(1)
					for p := slowPeak.Load(); n > p && !slowPeak.CompareAndSwap(p, n); p = slowPeak.Load() {
					}
					<-release
					slowInFlight.Add(-1)
				}
				order.end(key, seq, true)
				msg.Ack()
			}()
		}
	}()
	kototest.WaitFor(t, "partition 0's records to block in their handlers", func() bool { return slowInFlight.Load() > 0 })

	var fastRecs []*kgo.Record
	for p := int32(1); p < partitions; p++ {
		for i := range fast {
			key := fmt.Sprintf("p%d-k%d", p, i%keysPerPartition)
			rec := kototest.Record(topic, watermill.NewUUID(), key, []byte(key+"/"+strconv.Itoa(i/keysPerPartition)))
			rec.Partition = p
			fastRecs = append(fastRecs, rec)
		}
	}
	kototest.Produce(t, brokers, fastRecs, manual)
	kototest.WaitFor(t, "partitions 1–7 handled while partition 0 blocks", func() bool {
		return order.acked.Load() >= int64(len(fastRecs))
	})
	if n := order.acked.Load(); n != int64(len(fastRecs)) {
		t.Errorf("%d acks while partition 0 blocked, want partitions 1–7's %d", n, len(fastRecs))
	}
	if peak, bound := slowPeak.Load(), int64(concurrency-(partitions-1)*2); peak > bound {
		t.Errorf("partition 0 had %d records in flight, want at most %d (its own 2 and the 16 shared)", peak, bound)
	}

	releaseOnce.Do(func() { close(release) })
	kototest.WaitFor(t, "every record handled", func() bool { return order.acked.Load() >= int64(slow+len(fastRecs)) })
	kototest.WaitCommitted(t, brokers, cfg.ConsumerGroup, topic, int64(slow+len(fastRecs)))
	t.Logf("partition 0 peaked at %d in flight; %d records handled", slowPeak.Load(), order.acked.Load())
}
