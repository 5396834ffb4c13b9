package broker_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// keyedStream returns total records of topic over keys keys, record i
// with key i%keys and payload "key/seq", seq counting the key's records
// from 0 in offset order.
func keyedStream(topic string, keys, total int) []*kgo.Record {
	recs := make([]*kgo.Record, total)
	for i := range recs {
		key := "k" + strconv.Itoa(i%keys)
		recs[i] = kototest.Record(topic, watermill.NewUUID(), key, []byte(key+"/"+strconv.Itoa(i/keys)))
	}
	return recs
}

func parseKeyed(t *testing.T, msg *message.Message) (key string, seq int) {
	key, s, ok := strings.Cut(string(msg.Payload), "/")
	seq, err := strconv.Atoi(s)
	if !ok || err != nil {
		t.Errorf("payload %q is not key/seq", msg.Payload)
	}
	return key, seq
}

// keyOrder checks, as a handler runs, that no two messages of a key are
// in flight at once and that each key's messages are acked in their
// order, and counts what it saw.
type keyOrder struct {
	t        *testing.T
	mu       sync.Mutex
	busy     map[string]bool
	next     map[string]int // the seq of each key's next ack
	acked    atomic.Int64
	nacked   atomic.Int64
	inFlight atomic.Int64
	peak     atomic.Int64
}

func newKeyOrder(t *testing.T) *keyOrder {
	return &keyOrder{t: t, busy: map[string]bool{}, next: map[string]int{}}
}

func (o *keyOrder) begin(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.busy[key] {
		o.t.Errorf("two messages of key %s in flight at once", key)
	}
	o.busy[key] = true
	n := o.inFlight.Add(1)
	for p := o.peak.Load(); n > p && !o.peak.CompareAndSwap(p, n); p = o.peak.Load() {
	}
}

// end ends the delivery of key's message seq, acked or not.
func (o *keyOrder) end(key string, seq int, acked bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.busy[key] = false
	o.inFlight.Add(-1)
	if !acked {
		o.nacked.Add(1)
		return
	}
	if seq != o.next[key] {
		o.t.Errorf("key %s: message %d acked after %d, want message %d", key, seq, o.next[key]-1, o.next[key])
	}
	o.next[key] = seq + 1
	o.acked.Add(1)
}

// serve handles the messages of msgs as the router does, each on a
// goroutine of its own, until t ends: it waits 0–2 ms and nacks the first
// delivery of 2 % of the messages.
func (o *keyOrder) serve(msgs <-chan *message.Message) {
	var seen sync.Map
	var wg sync.WaitGroup
	o.t.Cleanup(wg.Wait)
	go func() {
		for msg := range msgs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key, seq := o.handle(msg)
				_, again := seen.LoadOrStore(msg.UUID, true)
				if !again && rand.N(50) == 0 {
					o.end(key, seq, false)
					msg.Nack()
					return
				}
				o.end(key, seq, true)
				msg.Ack()
			}()
		}
	}()
}

func (o *keyOrder) handle(msg *message.Message) (key string, seq int) {
	key, seq = parseKeyed(o.t, msg)
	o.begin(key)
	time.Sleep(time.Duration(rand.N(2001)) * time.Microsecond)
	return key, seq
}

// TestConcurrentKeepsEachKeyInOrder: 20 000 records (-short: 4 000) of
// 500 keys on 8 partitions, through a subscriber with Concurrency 64 and
// handlers that take 0–2 ms and fail 2 % of the first deliveries. Every
// message is acked once, each key's in offset order with never two in
// flight, messages of many keys are in flight at once, and the group
// commits every offset.
func TestConcurrentKeepsEachKeyInOrder(t *testing.T) {
	const keys, partitions = 500, 8
	total := 20000
	if testing.Short() {
		total = 4000
	}
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, partitions), "order")
	kototest.Produce(t, brokers, keyedStream(topic, keys, total))

	cfg := broker.Config{Brokers: brokers, ConsumerGroup: kototest.Group(t, "order"), Concurrency: 64, NackResendSleep: time.Millisecond}
	sub := kototest.NewSubscriber(t, cfg)
	order := newKeyOrder(t)
	order.serve(kototest.Subscribe(t, sub, topic))
	kototest.WaitFor(t, fmt.Sprintf("%d messages acked", total), func() bool { return order.acked.Load() >= int64(total) })

	kototest.WaitCommitted(t, brokers, cfg.ConsumerGroup, topic, int64(total))
	if err := sub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for k, next := range order.next {
		if next != total/keys {
			t.Errorf("key %s: %d messages acked, want %d", k, next, total/keys)
		}
	}
	if n := order.acked.Load(); n != int64(total) {
		t.Errorf("%d acks, want %d: a message was acked twice", n, total)
	}
	if p := order.peak.Load(); p < 2 || p > int64(cfg.Concurrency) {
		t.Errorf("at most %d messages in flight at once, want between 2 and Concurrency (%d)", p, cfg.Concurrency)
	}
	if order.nacked.Load() == 0 {
		t.Error("no message was nacked: the test did not exercise redelivery")
	}
	t.Logf("%d messages, %d nacks, at most %d in flight", total, order.nacked.Load(), order.peak.Load())
}
