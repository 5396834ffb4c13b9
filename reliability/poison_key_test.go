package reliability

import (
	"errors"
	"fmt"
	"slices"
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
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

// poisonRun is TestPoisonHoldsOnlyItsKey's handler and what it saw.
type poisonRun struct {
	t       *testing.T
	poison  string // UUID of the message that always fails
	others  atomic.Int64
	tries   atomic.Int64 // attempts at the poison
	first   int64        // messages of other keys at the poison's first attempt
	last    atomic.Int64 // and at its last
	mu      sync.Mutex
	busy    []int // the busy key's messages handled, in order
	after   int   // attempts at the poison when the next busy message came
	handled kototest.Counter
}

func (p *poisonRun) handle(msg *message.Message) error {
	key, seq, _ := strings.Cut(string(msg.Payload), "/")
	if msg.UUID == p.poison {
		if p.tries.Add(1) == 1 {
			p.first = p.others.Load()
			p.waitOthers()
		}
		p.last.Store(p.others.Load())
		return errors.New("cannot handle this message")
	}
	p.handled.Add(msg.UUID)
	if key != "busy" {
		p.others.Add(1)
		return nil
	}
	n, _ := strconv.Atoi(seq)
	p.mu.Lock()
	defer p.mu.Unlock()
	if n == poisonSeq+1 {
		p.after = int(p.tries.Load())
	}
	p.busy = append(p.busy, n)
	return nil
}

// waitOthers holds the poison's first attempt until messages of other
// keys were handled meanwhile; were they stopped behind it, it would fail
// the test.
func (p *poisonRun) waitOthers() {
	at := p.first
	deadline := time.Now().Add(kototest.DefaultTimeout)
	for p.others.Load() < at+50 {
		if time.Now().After(deadline) {
			p.t.Errorf("other keys stopped while the poison was tried: %d messages in %v", p.others.Load()-at, kototest.DefaultTimeout)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// poisonSeq is the place of the poison among the busy key's messages.
const poisonSeq = 20

// TestPoisonHoldsOnlyItsKey: on one partition, key "busy" has 40 messages
// and 20 other keys 40 each; the busy key's 21st message fails every
// attempt, behind a consumer with Concurrency 16. Its first attempt waits
// until 50 messages of other keys were handled meanwhile: they never stop.
// After the dead-letter middleware's retries it is dead-lettered, and the
// busy key moves on: its other 39 messages are handled, in order, the one
// after the poison only once the poison's attempts are over.
func TestPoisonHoldsOnlyItsKey(t *testing.T) {
	const perKey, otherKeys = 40, 20
	brokers := kototest.Embedded(t).Addrs()
	topic := kototest.NewTopic(t, broker.Config{Brokers: brokers, Provision: broker.ProvisionConfig{Partitions: 1}}, "poison")
	group := kototest.Group(t, "poison")
	kototest.Provision(t, broker.Config{Brokers: brokers}, topics.DeadLetter(group))
	p := &poisonRun{t: t}
	var recs []*kgo.Record
	for seq := range perKey {
		for k := range otherKeys + 1 {
			key := "busy"
			if k > 0 {
				key = "k" + strconv.Itoa(k)
			}
			id := watermill.NewUUID()
			if key == "busy" && seq == poisonSeq {
				p.poison = id
			}
			recs = append(recs, kototest.Record(topic, id, key, []byte(key+"/"+strconv.Itoa(seq))))
		}
	}
	kototest.Produce(t, brokers, recs)
	var dead kototest.Counter
	kototest.Watch(t, brokers, topics.DeadLetter(group), func(m *message.Message) { dead.Add(m.UUID) })

	store := idempotency.NewMemoryStore(0)
	t.Cleanup(func() { _ = store.Close() })
	c := startRouted(t, kototest.NewPublisher(t, broker.Config{Brokers: brokers}), routedSpec{
		cfg:   broker.Config{Brokers: brokers, ConsumerGroup: group, Concurrency: 16},
		topic: topic, store: store, effect: p.handle,
	})
	total := len(recs)
	c.waitDone(t, int64(total), kototest.DefaultTimeout, "the stream")
	kototest.WaitFor(t, "the poison on the dead-letter topic", func() bool { return dead.Get(p.poison) == 1 })
	kototest.WaitCommitted(t, brokers, group, topic, int64(total))

	want := slices.DeleteFunc(seqs(perKey), func(n int) bool { return n == poisonSeq })
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Equal(p.busy, want) {
		t.Errorf("busy key handled %v, want %v", p.busy, want)
	}
	if p.after != int(p.tries.Load()) || p.after < 2 {
		t.Errorf("the message after the poison came after %d of its %d attempts, want after all (and more than one)", p.after, p.tries.Load())
	}
	if n := p.handled.Distinct(); n != total-1 || p.handled.Total() != total-1 || dead.Total() != 1 {
		t.Errorf("%d messages handled %d times, %d dead letters; want %d once each and 1", n, p.handled.Total(), dead.Total(), total-1)
	}
	record(t, row{
		Checks:   "a poison message is dead-lettered and its key moves on, in order; other keys go on meanwhile",
		Faults:   fmt.Sprintf("one message of a busy key fails every attempt (%d attempts); Concurrency 16, one partition", p.tries.Load()),
		Messages: total,
		Losses:   total - 1 - p.handled.Distinct(),
		Note:     fmt.Sprintf("%d messages of other keys handled while the poison was tried", p.last.Load()-p.first),
	})
}

func seqs(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
