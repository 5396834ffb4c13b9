package reliability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/internal/dlqmeta"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// letterLog is a dead-letter publisher that notes each message it sent
// before Publish returns, so that a handler can tell whether a message
// was dead-lettered yet.
type letterLog struct {
	message.Publisher
	sent   kototest.Counter
	onSend func() // called after each publication
}

func (l *letterLog) Publish(topic string, msgs ...*message.Message) error {
	if err := l.Publisher.Publish(topic, msgs...); err != nil {
		return err
	}
	for _, m := range msgs {
		l.sent.Add(m.UUID)
	}
	if l.onSend != nil {
		l.onSend()
	}
	return nil
}

// letter is what a dead letter on the topic says of its message.
type letter struct {
	reason, class string
	attempts      int
}

// watchLetters collects the dead letters of cfg's group by message UUID,
// with a count of each.
func (r *ledgerRun) watchLetters(cfg consumerConfig) (*sync.Map, *kototest.Counter) {
	var letters sync.Map
	var count kototest.Counter
	kototest.Watch(r.t, r.brokers, topics.DeadLetter(cfg.Group), func(m *message.Message) {
		n, _ := strconv.Atoi(m.Metadata.Get(dlqmeta.Attempts))
		letters.Store(m.UUID, letter{reason: m.Metadata.Get(dlqmeta.Reason), class: m.Metadata.Get(dlqmeta.ErrorClass), attempts: n})
		count.Add(m.UUID)
	})
	return &letters, &count
}

// poisonKind is how a poison message of TestBatchNamedPoison fails.
type poisonKind int

const (
	notPoison   poisonKind = iota
	poisonClass            // a koto.Poison error: dead-lettered at once
	retryClass             // a plain error: retried alone, then dead-lettered
)

// namedPoisons is TestBatchNamedPoison's handler: it names the poison
// messages of each batch with their error, and checks that no batch that
// commits holds a message of a key whose earlier poison is not
// dead-lettered yet.
type namedPoisons struct {
	t      *testing.T
	kind   map[string]poisonKind
	places map[string]keySeq
	before map[string][]string // the poisons of each key, in order
	dead   *letterLog

	mu         sync.Mutex
	alone      map[string]int // calls of a poison in a batch of its own
	early      int            // messages that commit before an earlier poison of their key is dead-lettered
	calls      int
	largestBad int // the most poisons in one call
}

func newNamedPoisons(t *testing.T, msgs []*message.Message, places map[string]keySeq, dead *letterLog) *namedPoisons {
	p := &namedPoisons{t: t, kind: map[string]poisonKind{}, places: places, before: map[string][]string{}, dead: dead, alone: map[string]int{}}
	for j, i := range rand.Perm(len(msgs))[:len(msgs)/100] {
		p.kind[msgs[i].UUID] = poisonKind(1 + j%2) // poisonClass, retryClass
	}
	for _, m := range msgs { // each key's poisons in order
		if p.kind[m.UUID] != notPoison {
			key := places[m.UUID].key
			p.before[key] = append(p.before[key], m.UUID)
		}
	}
	return p
}

func (p *namedPoisons) wrap(h middleware.BatchHandlerFunc) middleware.BatchHandlerFunc {
	return func(ctx context.Context, msgs []*message.Message) error {
		failed := map[*message.Message]error{}
		good := make([]*message.Message, 0, len(msgs))
		for _, m := range msgs {
			switch p.kind[m.UUID] {
			case poisonClass:
				failed[m] = koto.Poison(fmt.Errorf("poison %s", m.Payload))
			case retryClass:
				failed[m] = fmt.Errorf("cannot handle %s", m.Payload)
			default:
				good = append(good, m)
			}
		}
		p.note(msgs, len(failed))
		if len(failed) == 0 { // this attempt commits
			p.checkAfterPoisons(good)
		}
		if err := h(ctx, good); err != nil {
			return err
		}
		return middleware.FailMessages(failed)
	}
}

func (p *namedPoisons) note(msgs []*message.Message, bad int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	p.largestBad = max(p.largestBad, bad)
	if len(msgs) == 1 && bad == 1 {
		p.alone[msgs[0].UUID]++
	}
}

// checkAfterPoisons counts the messages of good that come after a poison
// of their key not dead-lettered yet.
func (p *namedPoisons) checkAfterPoisons(good []*message.Message) {
	for _, m := range good {
		place := p.places[m.UUID]
		for _, id := range p.before[place.key] {
			if p.places[id].seq > place.seq || p.dead.sent.Get(id) > 0 {
				continue
			}
			p.mu.Lock()
			if p.early++; p.early <= 5 {
				p.t.Errorf("key %s: message %d commits before poison %d of its key was dead-lettered", place.key, place.seq, p.places[id].seq)
			}
			p.mu.Unlock()
		}
	}
}

// TestBatchNamedPoison: 10 000 messages (by default: 4 000) of 200 keys on 8
// partitions through a router handler of middleware.BatchDefaults in the
// transactional mode; 1 % of them, at random, are poison, and the handler names them
// with middleware.FailMessages, half with a koto.Poison error and half
// with a plain one. Each poison is dead-lettered alone, once, with its
// reason: a koto.Poison at its first attempt, a plain error after
// [batchAttempts] attempts, each retry a batch of its own. Every other
// message is in the ledger once, each key's in offset order, and none
// commits before an earlier poison of its key is dead-lettered.
func TestBatchNamedPoison(t *testing.T) {
	r := newBatchRun(t, 8)
	total := fullOrShort(10000, 4000)
	msgs, places := batchMessages("poison", 200, total)
	spec, cfg := r.batchConsumer(t, "batch-poison")
	dead := &letterLog{}
	p := newNamedPoisons(t, msgs, places, dead)
	stats := &batchStats{}
	var dups kototest.Counter
	hooks := batchHooks{
		dup:         func(id string) { dups.Add(id) },
		wrap:        func(h middleware.BatchHandlerFunc) middleware.BatchHandlerFunc { return stats.wrap(p.wrap(h)) },
		deadLetters: func(pub message.Publisher) message.Publisher { dead.Publisher = pub; return dead },
	}
	letters, count := r.watchLetters(cfg)
	runBatchConsumer(t, batchPool(t), spec, hooks, kototest.Logger(slog.LevelError+4)) // not the chain's line for each poison
	r.produce(msgs)
	r.waitConsumed(cfg, total, 3*time.Minute)
	kototest.WaitFor(t, "every poison on the dead-letter topic", func() bool { return count.Distinct() >= len(p.kind) })

	good := total - len(p.kind)
	duplicates, losses, outOfOrder := r.checkLedger(t, good, places, dups.Total())
	if count.Total() != len(p.kind) {
		t.Errorf("%d dead letters of %d messages, want the %d poisons once each", count.Total(), count.Distinct(), len(p.kind))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, kind := range p.kind {
		p.checkLetter(letters, id, kind)
	}
	record(t, row{
		Checks:     "each poison dead-lettered alone, once, with its reason; every other message committed once, each key in offset order; none before an earlier poison of its key is dead-lettered",
		Faults:     fmt.Sprintf("1 %% poison named by the handler (FailMessages): %d koto.Poison, %d plain errors (%d attempts)", len(p.kind)-p.count(retryClass), p.count(retryClass), batchAttempts),
		Messages:   total,
		Duplicates: duplicates,
		Losses:     losses,
		Note: fmt.Sprintf("router handler of BatchDefaults, 8 partitions, 200 keys; %d dead letters; %d rows out of key order; %d committed before an earlier poison; up to %d poisons named in one call; %s",
			count.Total(), outOfOrder, p.early, p.largestBad, stats),
	})
}

func (p *namedPoisons) count(kind poisonKind) int {
	n := 0
	for _, k := range p.kind {
		if k == kind {
			n++
		}
	}
	return n
}

// checkLetter checks the dead letter of poison id of kind: its reason,
// its attempts, and for a plain error that its retries ran alone. Under
// p.mu.
func (p *namedPoisons) checkLetter(letters *sync.Map, id string, kind poisonKind) {
	p.t.Helper()
	v, ok := letters.Load(id)
	if !ok {
		p.t.Errorf("poison %s was not dead-lettered", id)
		return
	}
	l := v.(letter)
	place := p.places[id]
	wantAttempts, wantClass := 1, koto.ClassPoison.String()
	if kind == retryClass {
		wantAttempts, wantClass = batchAttempts, koto.ClassRetryable.String()
	}
	if want := fmt.Sprintf(`{"key":%q,"seq":%d}`, place.key, place.seq); !strings.Contains(l.reason, want) {
		p.t.Errorf("dead letter of %s: reason %q, want one that names %s", id, l.reason, want)
	}
	if l.attempts != wantAttempts || l.class != wantClass {
		p.t.Errorf("dead letter of %s: %d attempts, class %q; want %d, %q", id, l.attempts, l.class, wantAttempts, wantClass)
	}
	if kind == retryClass && p.alone[id] < batchAttempts-1 {
		p.t.Errorf("poison %s ran alone %d times, want its %d retries alone", id, p.alone[id], batchAttempts-1)
	}
}

// bisectBound is the most handler calls that a batch of n messages with
// one culprit takes: 2⌈log₂n⌉+1.
func bisectBound(n int) int { return 2*bits.Len(uint(n-1)) + 1 }

// TestBatchUnnamedError: a cqrs batch consumer of a DurableOutbox's
// Service gets 500 messages of 100 keys (bursts of 5) in one batch; its
// handler writes a ledger row and publishes an event through the outbox
// for each, then fails the whole batch when it holds one culprit, chosen
// at random but for the last of its key, with an error that names no
// message (error), or a panic (panic). The culprit is found by bisection
// within 2⌈log₂500⌉+1 = 19 handler calls and dead-lettered alone; no
// other message runs more than ⌈log₂500⌉+1 = 10 times in the batch; the
// culprit's later messages of its key run again only once it is
// dead-lettered; the 499 others are in the ledger once, each key in offset
// order, and Kafka has exactly one event of each and none of the culprit:
// the failed attempts' events rolled back with them.
func TestBatchUnnamedError(t *testing.T) {
	for _, how := range []string{"error", "panic"} {
		t.Run(how, func(t *testing.T) { unnamedError(t, how) })
	}
}

func unnamedError(t *testing.T, how string) {
	const n = batchMax
	r := newBatchRun(t, 1) // a batch holds one partition's messages
	msgs, places := batchMessages("bisect", n/burst, n)
	culprit := msgs[burst*rand.N(n/burst)+rand.N(burst-1)].UUID
	cp := places[culprit]
	events := kototest.Topic(t, "events")
	seen := r.watchEvents(events)
	spec, cfg := r.batchConsumer(t, "batch-bisect")
	spec.CQRS, spec.Events, spec.MaxWait = true, events, 5*time.Second // the batch fills to 500 before
	stats := &batchStats{}
	var calls, callsAtLetter, early atomic.Int64
	var first atomic.Int64 // the size of the first batch
	dead := &letterLog{onSend: func() { callsAtLetter.Store(calls.Load()) }}
	fail := func(ctx context.Context, batch []*message.Message) error {
		calls.Add(1)
		first.CompareAndSwap(0, int64(len(batch)))
		var later int // the culprit's later messages of its key in batch
		for _, m := range batch {
			if p := places[m.UUID]; p.key == cp.key && p.seq > cp.seq {
				later++
			}
			if m.UUID != culprit {
				continue
			}
			if how == "panic" {
				panic("one of these is bad")
			}
			return koto.Poison(errors.New("one of these is bad"))
		}
		if later > 0 && dead.sent.Get(culprit) == 0 {
			early.Add(int64(later))
		}
		return nil
	}
	var dups kototest.Counter
	hooks := batchHooks{
		dup: func(id string) { dups.Add(id) },
		wrap: func(h middleware.BatchHandlerFunc) middleware.BatchHandlerFunc {
			return stats.wrap(func(ctx context.Context, batch []*message.Message) error {
				if err := h(ctx, batch); err != nil { // the rows and events, rolled back on failure
					return err
				}
				return fail(ctx, batch)
			})
		},
		deadLetters: func(pub message.Publisher) message.Publisher { dead.Publisher = pub; return dead },
	}
	letters, count := r.watchLetters(cfg)
	r.produce(msgs)
	runBatchConsumer(t, batchPool(t), spec, hooks, kototest.Logger(slog.LevelError+4))
	r.waitConsumed(cfg, n, 2*time.Minute)
	kototest.WaitFor(t, "the culprit on the dead-letter topic", func() bool { return count.Total() >= 1 })

	duplicates, losses, outOfOrder := r.checkLedger(t, n-1, places, dups.Total())
	if v, ok := letters.Load(culprit); !ok || count.Total() != 1 {
		t.Errorf("dead letters: %d, the culprit's among them %v; want the culprit alone", count.Total(), ok)
	} else if reason := v.(letter).reason; !strings.Contains(reason, "one of these is bad") {
		t.Errorf("the culprit's dead letter has reason %q, want the handler's error", reason)
	}
	bound := bisectBound(n)
	if first.Load() != n {
		t.Errorf("the first batch had %d messages, want %d", first.Load(), n)
	}
	if c := callsAtLetter.Load(); c > int64(bound) || c < 2 {
		t.Errorf("the handler ran %d times before the culprit was dead-lettered, want 2 to %d", c, bound)
	}
	most := 0 // runs of a good message in the batch
	for _, m := range msgs {
		if places[m.UUID].key != cp.key {
			most = max(most, stats.seen.Get(m.UUID))
		}
	}
	if early.Load() != 0 {
		t.Errorf("%d later messages of the culprit's key ran without it before it was dead-lettered", early.Load())
	}
	if runs := bits.Len(uint(n-1)) + 1; most > runs {
		t.Errorf("a good message ran %d times, want at most ⌈log₂%d⌉+1 = %d", most, n, runs)
	}
	eventRecords := seen.check(r, events, n-1)
	record(t, row{
		Checks:     "the culprit found and dead-lettered alone; the others committed once, each key in offset order, the culprit's later ones after it; handler calls ≤ 2⌈log₂n⌉+1; one event per committed message on Kafka (outbox), none of the failed attempts",
		Faults:     fmt.Sprintf("one message of a batch of %d fails it with %s that names no message", n, map[string]string{"error": "an error", "panic": "a panic"}[how]),
		Messages:   n,
		Duplicates: duplicates,
		Losses:     losses,
		Note: fmt.Sprintf("cqrs batch consumer, 100 keys; %d handler calls for the batch (bound %d), %d in all; another key's message ran %d times at most; %d event records; %d rows out of key order",
			callsAtLetter.Load(), bound, calls.Load(), most, eventRecords, outOfOrder),
	})
}
