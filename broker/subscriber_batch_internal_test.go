package broker

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestBatcherKeepsEachKeyInOrder drives a batcher with a random stream of
// records, batches cut at random moments and members settled in random
// order, a tenth of them nacked (with the rest of their key in the batch
// after them, as a batch handler does), and checks its promises: no key
// is in two batches in flight at once, a key's records go out in offset
// order, a nacked record goes out again first of its key, a batch is
// never larger than MaxMessages, and every record is acked once.
func TestBatcherKeepsEachKeyInOrder(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			checkBatcherModel(t, rand.New(rand.NewPCG(seed, 1)))
		})
	}
}

// batcherModel is what a run of the batcher has seen.
type batcherModel struct {
	t        *testing.T
	b        *batcher
	now      time.Time
	inFlight map[string]int   // records of each key in batches in flight
	next     map[string]int64 // the offset each key's next handed out record must have
	acked    map[int64]bool
	batches  [][]*sarama.ConsumerMessage
}

func checkBatcherModel(t *testing.T, rnd *rand.Rand) {
	const total, keys = 2000, 7
	m := &batcherModel{
		t: t, now: time.Unix(0, 0),
		b:        newBatcher(Config{Batch: BatchConfig{MaxMessages: 50, MaxBytes: 1 << 20, MaxWait: time.Millisecond}.WithDefaults(), NackResendSleep: time.Millisecond}),
		inFlight: map[string]int{}, next: map[string]int64{}, acked: map[int64]bool{},
	}
	var offset int64
	keyOf := func() []byte { return []byte("k" + strconv.Itoa(rnd.IntN(keys))) }
	for offset < total || len(m.batches) > 0 || len(m.b.keys) > 0 || len(m.b.open) > 0 {
		m.now = m.now.Add(time.Duration(rnd.IntN(300)) * time.Microsecond)
		switch r := rnd.IntN(10); {
		case r < 5 && offset < total:
			m.b.add(&sarama.ConsumerMessage{Key: keyOf(), Offset: offset}, m.now)
			offset++
		case r < 7 && m.b.ready(m.now):
			m.take()
		case r < 9 && len(m.batches) > 0:
			m.settleOne(rnd)
		default:
			m.b.wake(m.now)
		}
	}
	if len(m.acked) != total {
		t.Errorf("%d records acked, want %d", len(m.acked), total)
	}
}

func (m *batcherModel) take() {
	batch, _ := m.b.take()
	if len(batch) > m.b.cfg.MaxMessages {
		m.t.Fatalf("a batch of %d, above MaxMessages %d", len(batch), m.b.cfg.MaxMessages)
	}
	seen := map[string]bool{}
	for _, rec := range batch {
		k := string(rec.Key)
		if m.inFlight[k] > 0 && !seen[k] {
			m.t.Fatalf("key %s handed out in a batch while a batch in flight holds it", k)
		}
		seen[k] = true
		if want := m.next[k]; rec.Offset < want {
			m.t.Fatalf("key %s: offset %d handed out after %d", k, rec.Offset, want)
		}
		m.next[k] = rec.Offset + 1
		m.inFlight[k]++
	}
	m.batches = append(m.batches, batch)
}

// settleOne settles the first member of a random batch in flight: acked,
// or nacked with the rest of its key in the batch after it.
func (m *batcherModel) settleOne(rnd *rand.Rand) {
	i := rnd.IntN(len(m.batches))
	batch := m.batches[i]
	rec := batch[0]
	if rnd.IntN(10) > 0 {
		m.settle(rec, true)
		batch = batch[1:]
	} else {
		k, rest := string(rec.Key), batch[:0:0]
		for _, r := range batch {
			if string(r.Key) == k {
				m.settle(r, false)
				continue
			}
			rest = append(rest, r)
		}
		m.next[k] = rec.Offset // it goes out again, first of its key
		batch = rest
	}
	if len(batch) == 0 {
		m.batches = append(m.batches[:i], m.batches[i+1:]...)
		return
	}
	m.batches[i] = batch
}

func (m *batcherModel) settle(rec *sarama.ConsumerMessage, acked bool) {
	m.inFlight[string(rec.Key)]--
	if acked {
		if m.acked[rec.Offset] {
			m.t.Fatalf("offset %d acked twice", rec.Offset)
		}
		m.acked[rec.Offset] = true
	}
	m.b.settle(rec, acked, m.now)
}

// TestBatcherTimesAWaitingRecordFromItsArrival: a record that waited in
// its key's lane for the key's batch in flight is ready as soon as that
// batch is settled, if it came in MaxWait ago; it does not wait MaxWait
// again from the settle.
func TestBatcherTimesAWaitingRecordFromItsArrival(t *testing.T) {
	const wait = 50 * time.Millisecond
	b := newBatcher(Config{Batch: BatchConfig{MaxMessages: 10, MaxBytes: 1 << 20, MaxWait: wait, Parallel: 1}})
	t0 := time.Unix(1_700_000_000, 0)
	first := &sarama.ConsumerMessage{Key: []byte("a"), Offset: 0}
	b.add(first, t0)
	if recs, _ := b.take(); len(recs) != 1 {
		t.Fatalf("first batch %d records, want 1", len(recs))
	}
	b.add(&sarama.ConsumerMessage{Key: []byte("a"), Offset: 1}, t0)
	if b.ready(t0.Add(wait)) {
		t.Fatal("a record of a key in flight is ready")
	}
	b.settle(first, true, t0.Add(wait))
	if !b.ready(t0.Add(wait)) {
		t.Error("the key's next record, in for MaxWait, is not ready once its batch is settled")
	}
}
