package broker_test

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// spread returns n records per partition of topic, each of a key of its
// own, with payload "partition/offset": the records' offsets, as they are
// produced into an empty topic with kgo.ManualPartitioner.
func spread(topic string, partitions int32, n int) []*kgo.Record {
	var recs []*kgo.Record
	for i := range n {
		for p := range partitions {
			payload := fmt.Sprintf("%d/%d", p, i)
			rec := kototest.Record(topic, watermill.NewUUID(), "key-"+payload, []byte(payload))
			rec.Partition = p
			recs = append(recs, rec)
		}
	}
	return recs
}

// holder acks every message but those it holds, by payload, until
// released.
type holder struct {
	mu     sync.Mutex
	hold   map[string]bool
	held   map[string]*message.Message
	acked  map[string]int
	wanted chan struct{} // signalled at each ack or hold
}

func newHolder(hold ...string) *holder {
	h := &holder{hold: map[string]bool{}, held: map[string]*message.Message{}, acked: map[string]int{}, wanted: make(chan struct{}, 1)}
	for _, p := range hold {
		h.hold[p] = true
	}
	return h
}

func (h *holder) serve(msgs <-chan *message.Message) {
	go func() {
		for msg := range msgs {
			h.mu.Lock()
			p := string(msg.Payload)
			if h.hold[p] {
				h.held[p] = msg
			} else {
				h.acked[p]++
				msg.Ack()
			}
			h.mu.Unlock()
		}
	}()
}

// release acks the held message with payload p, and acks it from now on.
func (h *holder) release(t *testing.T, p string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.hold, p)
	msg, ok := h.held[p]
	if !ok {
		t.Fatalf("message %s is not held", p)
	}
	delete(h.held, p)
	h.acked[p]++
	msg.Ack()
}

func (h *holder) heldNow() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.held))
}

// ackedOf returns the payloads of partition p acked, sorted.
func (h *holder) ackedOf(p int32) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for payload := range h.acked {
		if strings.HasPrefix(payload, fmt.Sprintf("%d/", p)) {
			out = append(out, payload)
		}
	}
	slices.Sort(out)
	return out
}

// firstHeld waits until h holds a message and returns its payload.
func (h *holder) firstHeld(t *testing.T, what string) string {
	t.Helper()
	var first string
	kototest.WaitFor(t, what, func() bool {
		if held := h.heldNow(); len(held) > 0 {
			first = held[0]
		}
		return first != ""
	})
	return first
}

// stillLive fails t when the held message p's context has ended: the
// session that delivered it is over.
func (h *holder) stillLive(t *testing.T, p, why string) {
	t.Helper()
	h.mu.Lock()
	ctx := h.held[p].Context()
	h.mu.Unlock()
	if ctx.Err() != nil {
		t.Fatal(why)
	}
}

func (h *holder) ackedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.acked)
}

// committedAt returns the committed offset of each partition of topic.
func committedAt(t *testing.T, brokers []string, group, topic string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	for p, o := range kototest.CommittedOffsets(t, brokers, group, topic) {
		out[p] = o.At
	}
	return out
}

// TestCommittedOffsetStopsAtTheFirstUnackedMessage holds three messages of
// a two-partition topic unacked (offsets 10 and 50 of partition 0, 30 of
// partition 1) in a subscriber with Concurrency 32, which acks all the
// others. While they are held, every committed offset the broker reports
// is at most the first held offset of its partition, and reaches it; as
// each is released, the partition's committed offset moves to the next
// held offset, then to the end.
func TestCommittedOffsetStopsAtTheFirstUnackedMessage(t *testing.T) {
	const n = 100
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 2), "lwm")
	kototest.Produce(t, brokers, spread(topic, 2, n), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	group := kototest.Group(t, "lwm")
	h := newHolder("0/10", "0/50", "1/30")
	h.serve(kototest.Subscribe(t, kototest.NewSubscriber(t, broker.Config{Brokers: brokers, ConsumerGroup: group, Concurrency: 32}), topic))

	kototest.WaitFor(t, "every message but the held ones acked", func() bool { return h.ackedCount() == 2*n-3 })
	expectCommitted(t, brokers, group, topic, map[int32]int64{0: 10, 1: 30})
	h.release(t, "0/10")
	expectCommitted(t, brokers, group, topic, map[int32]int64{0: 50, 1: 30})
	h.release(t, "1/30")
	expectCommitted(t, brokers, group, topic, map[int32]int64{0: 50, 1: n})
	h.release(t, "0/50")
	expectCommitted(t, brokers, group, topic, map[int32]int64{0: n, 1: n})
}

// expectCommitted waits until the committed offsets are want, failing the
// test at once when one passes its want: the messages at want are held.
func expectCommitted(t *testing.T, brokers []string, group, topic string, want map[int32]int64) {
	t.Helper()
	kototest.WaitFor(t, fmt.Sprintf("committed offsets %v", want), func() bool {
		got := committedAt(t, brokers, group, topic)
		for p, w := range want {
			if got[p] > w {
				t.Fatalf("partition %d committed at %d, past the unacked message at %d", p, got[p], w)
			}
		}
		return maps.Equal(got, want)
	})
	// A few more of sarama's commits (one a second) must not pass them
	// either while the messages there are held.
	for range 15 {
		time.Sleep(100 * time.Millisecond)
		for p, at := range committedAt(t, brokers, group, topic) {
			if at > want[p] {
				t.Fatalf("partition %d committed at %d, past the unacked message at %d", p, at, want[p])
			}
		}
	}
}

// TestRestartSkipsOffsetsAckedAboveTheMark closes a subscriber while it
// holds offset 20 of a one-partition topic and has acked the 99 others.
// The committed offset is 20, and its metadata lists the offsets acked
// above it, so that the next subscriber of the group gets offset 20 again
// and none of the acked ones.
func TestRestartSkipsOffsetsAckedAboveTheMark(t *testing.T) {
	const n = 100
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "skip")
	kototest.Produce(t, brokers, spread(topic, 1, n), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cfg := broker.Config{Brokers: brokers, ConsumerGroup: kototest.Group(t, "skip"), Concurrency: 16, DrainTimeout: 100 * time.Millisecond}

	first, err := broker.NewSubscriber(cfg)
	if err != nil {
		t.Fatalf("NewSubscriber: %v", err)
	}
	h := newHolder("0/20")
	h.serve(kototest.Subscribe(t, first, topic))
	kototest.WaitFor(t, "every message but offset 20 acked", func() bool { return h.ackedCount() == n-1 })
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	o := kototest.CommittedOffsets(t, brokers, cfg.ConsumerGroup, topic)[0]
	if o.At != 20 || !strings.HasPrefix(o.Metadata, "koto1:") {
		t.Fatalf("committed offset %d with metadata %q, want 20 with the offsets acked above it", o.At, o.Metadata)
	}

	kototest.Produce(t, brokers, []*kgo.Record{kototest.Record(topic, watermill.NewUUID(), "", []byte("after"))})
	again := newHolder()
	again.serve(kototest.Subscribe(t, kototest.NewSubscriber(t, cfg), topic))
	kototest.WaitCommitted(t, brokers, cfg.ConsumerGroup, topic, n+1)
	if got := slices.Sorted(maps.Keys(again.acked)); !slices.Equal(got, []string{"0/20", "after"}) {
		t.Errorf("the next subscriber got %v, want [0/20 after]: the unacked message and the new one", got)
	}
}

// TestCooperativeNewClaimSkipsOffsetsAckedAboveTheMark runs two
// subscribers of the cooperative-sticky strategy on a two-partition topic:
// A joins alone, then B joins and gets one partition, p, of which it holds
// offsets 5 and 30 and acks the others, while A holds offset 5 of its own.
// B closes, committing 5 with the offsets acked above it, and A gets p in
// a rebalance that keeps its session, so without a new Setup (its held
// message stays live): A gets offsets 5 and 30 of p again, and a record
// produced after, but none of those B acked.
func TestCooperativeNewClaimSkipsOffsetsAckedAboveTheMark(t *testing.T) {
	const n = 50
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 2), "coopskip")
	cfg := broker.Config{
		Brokers: brokers, ConsumerGroup: kototest.Group(t, "coopskip"), Concurrency: 8, DrainTimeout: 100 * time.Millisecond,
		Sarama: func(sc *sarama.Config) {
			sc.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
			sc.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
		},
	}
	a := newHolder("0/5", "1/5")
	a.serve(kototest.Subscribe(t, kototest.NewSubscriber(t, cfg), topic))
	waitAssigned(t, brokers, cfg.ConsumerGroup, 2)
	subB := kototest.NewSubscriber(t, cfg)
	b := newHolder("0/5", "0/30", "1/5", "1/30")
	b.serve(kototest.Subscribe(t, subB, topic))
	waitAssigned(t, brokers, cfg.ConsumerGroup, 1, 1)

	// Produced once each member has its partition, so that neither reads
	// the other's.
	kototest.Produce(t, brokers, spread(topic, 2, n), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kototest.WaitFor(t, "each subscriber to ack all but its held messages", func() bool {
		return a.ackedCount() == n-1 && b.ackedCount() == n-2
	})
	p := int32(b.heldNow()[0][0] - '0')
	if err := subB.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	o := kototest.CommittedOffsets(t, brokers, cfg.ConsumerGroup, topic)[p]
	if o.At != 5 || !strings.HasPrefix(o.Metadata, "koto1:") {
		t.Fatalf("partition %d committed at %d with metadata %q, want 5 with the offsets acked above it", p, o.At, o.Metadata)
	}

	after := kototest.Record(topic, watermill.NewUUID(), "", []byte(fmt.Sprintf("%d/after", p)))
	after.Partition = p
	kototest.Produce(t, brokers, []*kgo.Record{after}, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	moved, kept := fmt.Sprintf("%d/5", p), fmt.Sprintf("%d/5", 1-p)
	kototest.WaitFor(t, "A to get the held message of B's partition", func() bool { return slices.Contains(a.heldNow(), moved) })
	a.stillLive(t, kept, "the held message of A's own partition was cancelled: its session ended, and Setup ran again")
	a.release(t, moved)
	a.release(t, kept)
	kototest.WaitCommitted(t, brokers, cfg.ConsumerGroup, topic, 2*n+1)
	want := []string{fmt.Sprintf("%d/30", p), moved, fmt.Sprintf("%d/after", p)}
	if got := a.ackedOf(p); !slices.Equal(got, want) {
		t.Errorf("A got %v of partition %d, want %v: what B did not ack, none of what it did", got, p, want)
	}
}

// waitAssigned waits until the members of group are assigned, between
// them, as many partitions as want lists, in its order.
func waitAssigned(t *testing.T, brokers []string, group string, want ...int) {
	t.Helper()
	admin := kototest.Admin(t, brokers)
	kototest.WaitFor(t, fmt.Sprintf("group %s assigned %v partitions", group, want), func() bool {
		described, err := admin.DescribeGroups(kototest.Context(t), group)
		if err != nil {
			t.Fatalf("DescribeGroups: %v", err)
		}
		var got []int
		for _, m := range described[group].Members {
			if c, ok := m.Assigned.AsConsumer(); ok {
				for _, tp := range c.Topics {
					got = append(got, len(tp.Partitions))
				}
			}
		}
		slices.Sort(got)
		return slices.Equal(got, want)
	})
}

// TestNackHoldsOnlyItsKey nacks the first message of key a until all 20
// messages of key b are acked: b's go on meanwhile, and the second message
// of a is not handed out until the first is acked.
func TestNackHoldsOnlyItsKey(t *testing.T) {
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "nack")
	var recs []*kgo.Record
	recs = append(recs, kototest.Record(topic, watermill.NewUUID(), "a", []byte("a/0")), kototest.Record(topic, watermill.NewUUID(), "a", []byte("a/1")))
	for i := range 20 {
		recs = append(recs, kototest.Record(topic, watermill.NewUUID(), "b", []byte("b/"+strconv.Itoa(i))))
	}
	kototest.Produce(t, brokers, recs)
	cfg := broker.Config{Brokers: brokers, ConsumerGroup: kototest.Group(t, "nack"), Concurrency: 4, NackResendSleep: time.Millisecond}
	msgs := kototest.Subscribe(t, kototest.NewSubscriber(t, cfg), topic)

	// b's messages are held, unacked, until a/0 was nacked once: a/0 is
	// in flight from the start, so it comes while they are held, however
	// fast the machine hands out the others.
	var got []string
	var held []*message.Message
	bAcked, nacks := 0, 0
	ack := func(m *message.Message) {
		if strings.HasPrefix(string(m.Payload), "b/") {
			bAcked++
		}
		got = append(got, string(m.Payload))
		m.Ack()
	}
	for len(got) < len(recs) {
		m := kototest.Receive(t, msgs, "message")
		switch p := string(m.Payload); {
		case p == "a/0" && bAcked < 20:
			nacks++
			m.Nack()
			for _, h := range held {
				ack(h)
			}
			held = nil
		case p == "a/1" && !slices.Contains(got, "a/0"):
			t.Fatalf("a/1 handed out before a/0 was acked")
		case nacks == 0:
			held = append(held, m)
		default:
			ack(m)
		}
	}
	if nacks == 0 || got[20] != "a/0" || got[21] != "a/1" {
		t.Errorf("acks in the order %v after %d nacks of a/0; want b's 20, then a/0, then a/1", got, nacks)
	}
}

// TestHeldMessageBoundsWhatIsFetchedAboveIt holds offset 0 of a
// one-partition topic of 1000 records, each of a key of its own, in a
// subscriber with Concurrency 8 and PartitionBufferRecords 10, which acks
// the others. The partition reads while fewer than 10 × 10 offsets from
// its low-water mark, the held one, on were read: it hands out offsets 1
// to 99 and then none, for as long as offset 0 is held. Released, the rest
// comes and the committed offset reaches the end.
func TestHeldMessageBoundsWhatIsFetchedAboveIt(t *testing.T) {
	const n, buffer = 1000, 10
	const above = 10*buffer - 1 // offsets 1 to 99: the unexported factor is 10
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "ahead")
	kototest.Produce(t, brokers, spread(topic, 1, n), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cfg := broker.Config{Brokers: brokers, ConsumerGroup: kototest.Group(t, "ahead"), Concurrency: 8, PartitionBufferRecords: buffer}
	h := newHolder("0/0")
	h.serve(kototest.Subscribe(t, kototest.NewSubscriber(t, cfg), topic))

	kototest.WaitFor(t, fmt.Sprintf("the %d messages above the held one acked", above), func() bool { return h.ackedCount() >= above })
	for range 50 { // sarama has fetched far more than that by now, unbounded
		if got := h.ackedCount(); got > above {
			t.Fatalf("%d messages handed out above the held one, want at most %d", got, above)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.release(t, "0/0")
	kototest.WaitFor(t, "every message acked", func() bool { return h.ackedCount() == n })
	kototest.WaitCommitted(t, brokers, cfg.ConsumerGroup, topic, n)
}
