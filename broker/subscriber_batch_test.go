package broker_test

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// batchSubscriber returns a batch subscriber in group on brokers.
func batchSubscriber(t *testing.T, brokers []string, group string, batch broker.BatchConfig) *broker.Subscriber {
	t.Helper()
	sub, err := broker.NewBatchSubscriber(broker.Config{Brokers: brokers, ConsumerGroup: group, Batch: batch, NackResendSleep: time.Millisecond})
	if err != nil {
		t.Fatalf("NewBatchSubscriber: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// receiveBatch receives the next batch message of msgs and its batch.
func receiveBatch(t *testing.T, msgs <-chan *message.Message) (*message.Message, *koto.Batch) {
	t.Helper()
	env := kototest.Receive(t, msgs, "batch")
	b, ok := koto.BatchFromContext(env.Context())
	if !ok {
		t.Fatalf("message %s carries no batch", env.UUID)
	}
	return env, b
}

// ackAll acks every message of b, then the batch message env.
func ackAll(env *message.Message, b *koto.Batch) {
	for i := range b.Messages {
		b.Ack(i)
	}
	env.Ack()
}

// keyed returns n records of topic's partition 0 with key and payloads
// "key/seq", seq from first; size pads each payload to at least size
// bytes.
func keyed(topic, key string, first, n, size int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		payload := key + "/" + strconv.Itoa(first+i)
		if pad := size - len(payload); pad > 0 {
			payload += "/" + strings.Repeat("x", pad)
		}
		recs[i] = kototest.Record(topic, watermill.NewUUID(), key, []byte(payload))
		recs[i].Partition = 0
	}
	return recs
}

// seqs returns "key/seq" of each message of b, in order.
func seqs(b *koto.Batch) []string {
	out := make([]string, len(b.Messages))
	for i, m := range b.Messages {
		parts := strings.SplitN(string(m.Payload), "/", 3)
		out[i] = parts[0] + "/" + parts[1]
	}
	return out
}

// TestBatchSubscriberKeepsAKeyWhileItsBatchIsOut: 200 small records of
// key a, then one large record of key b, on one partition; batches of up
// to 100 messages or 64 KiB, no flush on time. The first batch is a's
// first 100 (count). While it is not settled, a's later records wait: the
// next batch is b's record alone (bytes), though a slot was free and a's
// records were read. Once the first batch is acked, a's next 100 come in
// offset order, and every message's context says where it was read from.
func TestBatchSubscriberKeepsAKeyWhileItsBatchIsOut(t *testing.T) {
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "batch-key")
	recs := append(keyed(topic, "a", 0, 200, 0), keyed(topic, "b", 0, 1, 70<<10)...)
	kototest.Produce(t, brokers, recs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	group := kototest.Group(t, "batch-key")
	sub := batchSubscriber(t, brokers, group, broker.BatchConfig{MaxMessages: 100, MaxBytes: 64 << 10, MaxWait: time.Hour, Parallel: 2})
	msgs := kototest.Subscribe(t, sub, topic)

	// The two batches go out at once, in either order.
	first, fb := receiveBatch(t, msgs)
	second, sb := receiveBatch(t, msgs)
	if len(fb.Messages) == 1 {
		first, fb, second, sb = second, sb, first, fb
	}
	wantSeqs(t, fb, "count", "a", 0, 100)
	if got := seqs(sb); len(got) != 1 || got[0] != "b/0" || sb.Reason != "bytes" {
		t.Fatalf("second batch %v (%s), want b/0 alone (bytes): a's records must wait for its batch in flight", got, sb.Reason)
	}
	ackAll(second, sb)
	ackAll(first, fb)
	third, tb := receiveBatch(t, msgs)
	wantSeqs(t, tb, "count", "a", 100, 100)
	for i, m := range tb.Messages {
		pos, ok := koto.PositionFromContext(m.Context())
		if !ok || pos.Topic != topic || pos.Offset != int64(100+i) || string(pos.Key) != "a" {
			t.Fatalf("message %d of the third batch is at %+v (%v), want %s/0/%d", i, pos, ok, topic, 100+i)
		}
	}
	ackAll(third, tb)
	kototest.WaitCommitted(t, brokers, group, topic, 201)
}

// wantSeqs checks that b holds key's records first..first+n-1 in order,
// cut for reason.
func wantSeqs(t *testing.T, b *koto.Batch, reason, key string, first, n int) {
	t.Helper()
	got := seqs(b)
	if len(got) != n || b.Reason != reason {
		t.Fatalf("batch of %d (%s), want %d (%s): %v", len(got), b.Reason, n, reason, got)
	}
	for i, s := range got {
		if want := key + "/" + strconv.Itoa(first+i); s != want {
			t.Fatalf("batch message %d is %s, want %s", i, s, want)
		}
	}
}

// TestBatchSubscriberHandsANackedMessageOutAgainFirst: of a batch of one
// key's 100 records, the first 50 are acked and the last 50 nacked; the
// next batch is those 50 again, then the key's 50 later records, in
// offset order, and only the acked offsets are committed before it.
func TestBatchSubscriberHandsANackedMessageOutAgainFirst(t *testing.T) {
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "batch-nack")
	kototest.Produce(t, brokers, keyed(topic, "a", 0, 150, 0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	group := kototest.Group(t, "batch-nack")
	sub := batchSubscriber(t, brokers, group, broker.BatchConfig{MaxMessages: 100, MaxWait: time.Hour})
	msgs := kototest.Subscribe(t, sub, topic)

	env, b := receiveBatch(t, msgs)
	wantSeqs(t, b, "count", "a", 0, 100)
	for i := range b.Messages {
		if i < 50 {
			b.Ack(i)
		} else {
			b.Nack(i)
		}
	}
	env.Ack()
	kototest.WaitCommitted(t, brokers, group, topic, 50)
	env, b = receiveBatch(t, msgs)
	wantSeqs(t, b, "count", "a", 50, 100)
	ackAll(env, b)
	kototest.WaitCommitted(t, brokers, group, topic, 150)
}

// TestBatchSubscriberCountsMembersAckedOnTheirMessage: a handler that
// acks a batch's members on their own messages, not through the batch,
// has them counted as acked: committed, not handed out again.
func TestBatchSubscriberCountsMembersAckedOnTheirMessage(t *testing.T) {
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "batch-member-ack")
	kototest.Produce(t, brokers, keyed(topic, "a", 0, 20, 0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	group := kototest.Group(t, "batch-member-ack")
	sub := batchSubscriber(t, brokers, group, broker.BatchConfig{MaxMessages: 20, MaxWait: time.Hour})
	msgs := kototest.Subscribe(t, sub, topic)

	env, b := receiveBatch(t, msgs)
	wantSeqs(t, b, "count", "a", 0, 20)
	for _, m := range b.Messages {
		m.Ack()
	}
	env.Ack()
	kototest.WaitCommitted(t, brokers, group, topic, 20)
}

// TestBatchSubscriberFillsOnTime: ten records, batches of up to 500: the
// batch goes out MaxWait after it began filling, with the ten, and a
// batch message nacked by its handler nacks what it left unsettled, which
// comes back.
func TestBatchSubscriberFillsOnTime(t *testing.T) {
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "batch-time")
	kototest.Produce(t, brokers, keyed(topic, "a", 0, 10, 0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	group := kototest.Group(t, "batch-time")
	sub := batchSubscriber(t, brokers, group, broker.BatchConfig{MaxWait: 200 * time.Millisecond})
	msgs := kototest.Subscribe(t, sub, topic)

	// The batch may go out before all ten were read; the handler nacks it
	// until it holds them.
	for {
		env, b := receiveBatch(t, msgs)
		if b.Reason != "time" {
			t.Fatalf("a batch of %d cut for %q, want time", len(b.Messages), b.Reason)
		}
		if len(b.Messages) == 10 {
			wantSeqs(t, b, "time", "a", 0, 10)
			ackAll(env, b)
			break
		}
		env.Nack()
	}
	kototest.WaitCommitted(t, brokers, group, topic, 10)
}

// TestBatchSubscriberBoundsBatchesInFlight: four partitions, batches of
// up to 20, Parallel 2. The reader holds every batch it gets and, once two
// are held, looks for a third before it lets the oldest go. Every record
// arrives once.
func TestBatchSubscriberBoundsBatchesInFlight(t *testing.T) {
	const partitions, perPartition = 4, 100
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, partitions), "batch-parallel")
	kototest.Produce(t, brokers, spread(topic, partitions, perPartition), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	group := kototest.Group(t, "batch-parallel")
	sub := batchSubscriber(t, brokers, group, broker.BatchConfig{MaxMessages: 20, MaxWait: 10 * time.Millisecond, Parallel: 2})
	msgs := kototest.Subscribe(t, sub, topic)

	type held struct {
		env *message.Message
		b   *koto.Batch
	}
	var (
		queue []held
		seen  = map[string]bool{}
	)
	for len(seen) < partitions*perPartition {
		env, b := receiveBatch(t, msgs)
		for _, m := range b.Messages {
			if seen[string(m.Payload)] {
				t.Fatalf("%s handed out twice", m.Payload)
			}
			seen[string(m.Payload)] = true
		}
		queue = append(queue, held{env, b})
		if len(queue) < 2 && len(seen) < partitions*perPartition {
			continue
		}
		noThirdBatch(t, msgs)
		ackAll(queue[0].env, queue[0].b)
		queue = queue[1:]
	}
	for _, h := range queue {
		ackAll(h.env, h.b)
	}
	kototest.WaitCommitted(t, brokers, group, topic, partitions*perPartition)
}

// noThirdBatch fails t if a batch is handed out while two are held: a
// look of 50 ms, in which a subscriber that ignored Parallel would offer
// the next.
func noThirdBatch(t *testing.T, msgs <-chan *message.Message) {
	t.Helper()
	select {
	case <-msgs:
		t.Fatal("a third batch handed out with two in flight, want at most Parallel (2)")
	case <-time.After(50 * time.Millisecond):
	}
}

// TestBatchSubscriberCloseDrainsBatches: Close begins while a batch is in
// flight; what the handler acks during the drain is committed, and Close
// returns once the batch is settled.
func TestBatchSubscriberCloseDrainsBatches(t *testing.T) {
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "batch-drain")
	kototest.Produce(t, brokers, keyed(topic, "a", 0, 30, 0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	group := kototest.Group(t, "batch-drain")
	sub := batchSubscriber(t, brokers, group, broker.BatchConfig{MaxMessages: 30, MaxWait: time.Hour})
	msgs := kototest.Subscribe(t, sub, topic)

	env, b := receiveBatch(t, msgs)
	closed := make(chan error, 1)
	go func() { closed <- sub.Close() }()
	// Close cannot end before the batch is settled; without a drain it
	// would end at once, and commit nothing.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range msgs {
		}
	}()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with a batch in flight", err)
	case <-env.Context().Done():
		t.Fatal("the batch's context ended before it was settled")
	case <-time.After(50 * time.Millisecond): // a Close that did not drain would be back by now
	}
	ackAll(env, b)
	if err := kototest.Receive(t, closed, "end of Close"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	if got := kototest.Committed(t, brokers, group, topic); got != 30 {
		t.Errorf("committed %d, want the 30 acked in the drain", got)
	}
}

// TestNewBatchSubscriberRefusesBadBatches: each bad setting is named.
func TestNewBatchSubscriberRefusesBadBatches(t *testing.T) {
	for _, tc := range []struct {
		cfg  broker.Config
		want string
	}{
		{broker.Config{Batch: broker.BatchConfig{MaxMessages: -1}}, "Batch.MaxMessages"},
		{broker.Config{Batch: broker.BatchConfig{MaxBytes: -1}}, "Batch.MaxBytes"},
		{broker.Config{Batch: broker.BatchConfig{MaxWait: -time.Second}}, "Batch.MaxWait"},
		{broker.Config{Batch: broker.BatchConfig{Parallel: -2}}, "Batch.Parallel"},
		{broker.Config{Batch: broker.BatchConfig{MaxMessages: 600}, PartitionBufferRecords: 100}, "PartitionBufferRecords"},
		{broker.Config{Batch: broker.BatchConfig{MaxBytes: 4 << 20}, PartitionBufferBytes: 1 << 20}, "PartitionBufferBytes"},
	} {
		tc.cfg.Brokers, tc.cfg.ConsumerGroup = []string{"127.0.0.1:1"}, "g"
		_, err := broker.NewBatchSubscriber(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, koto.ErrInvalidConfig) {
			t.Errorf("NewBatchSubscriber(%+v): %v, want an invalid config naming %s", tc.cfg.Batch, err, tc.want)
		}
	}
}

// TestBatchSubscriberRestartSkipsWhatWasAcked: of a batch of ten keys,
// the last nine are acked and the first is left unsettled when the
// subscriber closes; the commit stays at offset 0 and lists the nine in
// its metadata, and the group's next batch subscriber gets offset 0
// alone.
func TestBatchSubscriberRestartSkipsWhatWasAcked(t *testing.T) {
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "batch-restart")
	kototest.Produce(t, brokers, spread(topic, 1, 10), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	group := kototest.Group(t, "batch-restart")
	cfg := broker.Config{Brokers: brokers, ConsumerGroup: group, DrainTimeout: 100 * time.Millisecond,
		Batch: broker.BatchConfig{MaxMessages: 10, MaxWait: time.Hour}}
	first, err := broker.NewBatchSubscriber(cfg)
	if err != nil {
		t.Fatalf("NewBatchSubscriber: %v", err)
	}
	msgs := kototest.Subscribe(t, first, topic)
	_, b := receiveBatch(t, msgs)
	for i := 1; i < len(b.Messages); i++ {
		b.Ack(i)
	}
	go func() {
		for range msgs {
		}
	}()
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if o := kototest.CommittedOffsets(t, brokers, group, topic)[0]; o.At != 0 || !strings.HasPrefix(o.Metadata, "koto1:") {
		t.Fatalf("committed %d with metadata %q, want 0 listing the acked offsets", o.At, o.Metadata)
	}
	second := batchSubscriber(t, brokers, group, broker.BatchConfig{MaxWait: 10 * time.Millisecond})
	env, b := receiveBatch(t, kototest.Subscribe(t, second, topic))
	if got := seqs(b); len(got) != 1 || got[0] != "0/0" {
		t.Errorf("the next subscriber got %v, want 0/0 alone: what was acked came again", got)
	}
	ackAll(env, b)
}

// TestBatchSubscriberRetriesAnUndecodableRecord: a record the Marshaler
// refuses three times holds its batch until it decodes; then the batch
// goes out whole, in offset order, nothing skipped.
func TestBatchSubscriberRetriesAnUndecodableRecord(t *testing.T) {
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, 1), "batch-decode")
	kototest.Produce(t, brokers, []*kgo.Record{
		kototest.Record(topic, watermill.NewUUID(), "a", []byte("a/0")),
		kototest.Record(topic, watermill.NewUUID(), "b", []byte("bad")),
		kototest.Record(topic, watermill.NewUUID(), "c", []byte("c/0")),
	}, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	m := &refusing{}
	sub, err := broker.NewBatchSubscriber(broker.Config{Brokers: brokers, ConsumerGroup: kototest.Group(t, "batch-decode"),
		Marshaler: m, ReconnectRetrySleep: 20 * time.Millisecond, Batch: broker.BatchConfig{MaxMessages: 3, MaxWait: time.Hour}})
	if err != nil {
		t.Fatalf("NewBatchSubscriber: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	env, b := receiveBatch(t, kototest.Subscribe(t, sub, topic))
	var got []string
	for _, msg := range b.Messages {
		got = append(got, string(msg.Payload))
	}
	if len(got) != 3 || got[0] != "a/0" || got[1] != "bad" || got[2] != "c/0" || m.refused.Load() < 4 {
		t.Errorf("batch %v after %d decodings of the bad record; want a/0, bad, c/0, bad decoded at the 4th try", got, m.refused.Load())
	}
	ackAll(env, b)
}
