package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/internal/dlqmeta"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// sentLetters records the messages a publisher sent, before it returns,
// so that a handler can tell whether a message was dead-lettered yet.
type sentLetters struct {
	message.Publisher
	mu   sync.Mutex
	sent map[string]string // uuid → reason
}

func (d *sentLetters) Publish(topic string, msgs ...*message.Message) error {
	if err := d.Publisher.Publish(topic, msgs...); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range msgs {
		d.sent[m.UUID] = m.Metadata.Get(dlqmeta.Reason)
	}
	return nil
}

func (d *sentLetters) reason(uuid string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.sent[uuid]
	return r, ok
}

func (d *sentLetters) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.sent)
}

// TestBatchNamedPoisonGoesAloneAndKeepsItsKeyWaiting: 1 % of 3 000
// messages are poison, and the batch handler names them with their error.
// Each is dead-lettered alone with its reason; every other message is in
// the ledger once; and when a message of a key that had a poison reaches
// the handler, that poison is on the dead-letter topic already.
func TestBatchNamedPoisonGoesAloneAndKeepsItsKeyWaiting(t *testing.T) {
	const keys, perKey = 30, 100
	env := newKafkaEnv(t)
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	store, lg := postgresStoreIn(t, pool, schema), newLedger(t, pool, schema, keys, true)
	topic := kototest.NewTopic(t, broker.Config{Brokers: env.brokers, Provision: broker.ProvisionConfig{Partitions: 4}}, "poison")
	msgs := keyedMessages(keys, perKey)
	poison := map[string]bool{}
	for i, m := range msgs {
		if i%100 == 37 {
			poison[m.UUID] = true
		}
	}
	env.publish(t, topic, msgs...)

	dl := &sentLetters{Publisher: env.pub, sent: map[string]string{}}
	rig := newBatchRig(t, env, topic, middleware.Config{Publisher: dl, Store: store, Idempotency: middleware.IdempotencyConfig{Transactional: true}},
		broker.BatchConfig{MaxMessages: 300, MaxWait: 20 * time.Millisecond})
	poisonOf := poisonIndex(t, msgs, poison)
	rig.run(t, func(ctx context.Context, batch []*message.Message) error {
		failed := map[*message.Message]error{}
		var good []*message.Message
		for _, m := range batch {
			if poison[m.UUID] {
				failed[m] = koto.Poison(fmt.Errorf("poison %s", m.Payload))
			} else {
				good = append(good, m)
			}
		}
		if len(failed) == 0 { // this attempt commits
			for _, m := range good {
				for _, p := range poisonOf.before(m) {
					if _, ok := dl.reason(p); !ok {
						t.Errorf("%s commits before poison %s of its key was dead-lettered", m.Payload, p)
					}
				}
			}
		}
		if err := lg.write(ctx, good); err != nil {
			return err
		}
		return middleware.FailMessages(failed)
	})
	kototest.WaitFor(t, "every good message in the ledger and every poison dead-lettered", func() bool {
		return lg.rows() >= len(msgs)-len(poison) && dl.count() >= len(poison)
	})
	if rows := lg.rows(); rows != len(msgs)-len(poison) {
		t.Errorf("ledger has %d rows, want %d", rows, len(msgs)-len(poison))
	}
	lg.checkDistinct(t)
	for uuid := range poison {
		if r, ok := dl.reason(uuid); !ok || r == "" {
			t.Errorf("poison %s dead-lettered %v with reason %q, want a reason", uuid, ok, r)
		}
	}
	if n := dl.count(); n != len(poison) {
		t.Errorf("%d dead letters, want the %d poisons", n, len(poison))
	}
}

// TestBatchUnnamedErrorIsBisected: one poison in a batch of 500 whose
// handler fails the whole batch without naming it: the poison is found
// and dead-lettered, the 499 others are in the ledger once, and the
// handler ran at most 2⌈log₂500⌉+1 = 19 times.
func TestBatchUnnamedErrorIsBisected(t *testing.T) {
	const n = 500
	env := newKafkaEnv(t)
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	store, lg := postgresStoreIn(t, pool, schema), newLedger(t, pool, schema, n, true)
	cfg := env.config()
	cfg.Provision.Partitions = 1 // the 500 in one batch
	topic := kototest.NewTopic(t, cfg, "bisect")
	msgs := keyedMessages(n, 1)
	culprit := msgs[321].UUID
	env.publish(t, topic, msgs...)

	dl := &sentLetters{Publisher: env.pub, sent: map[string]string{}}
	rig := newBatchRig(t, env, topic, middleware.Config{Publisher: dl, Store: store, Idempotency: middleware.IdempotencyConfig{Transactional: true}},
		broker.BatchConfig{MaxMessages: n, MaxWait: time.Minute})
	var calls atomic.Int64
	rig.run(t, func(ctx context.Context, batch []*message.Message) error {
		calls.Add(1)
		for _, m := range batch {
			if m.UUID == culprit {
				return koto.Poison(errors.New("one of these is bad"))
			}
		}
		return lg.write(ctx, batch)
	})
	kototest.WaitFor(t, "499 messages in the ledger and the culprit dead-lettered", func() bool {
		return lg.rows() >= n-1 && dl.count() >= 1
	})
	if rows := lg.rows(); rows != n-1 {
		t.Errorf("ledger has %d rows, want %d", rows, n-1)
	}
	lg.checkDistinct(t)
	if _, ok := dl.reason(culprit); !ok || dl.count() != 1 {
		t.Errorf("dead letters: culprit %v, %d in all; want the culprit alone", ok, dl.count())
	}
	if c := calls.Load(); c > 19 {
		t.Errorf("the handler ran %d times, want at most 19", c)
	}
	t.Logf("%d handler calls", calls.Load())
}

// poisons maps each key to its poison messages, by seq.
type poisons map[string][]struct {
	seq  int
	uuid string
}

func poisonIndex(t *testing.T, msgs []*message.Message, poison map[string]bool) poisons {
	t.Helper()
	p := poisons{}
	for _, m := range msgs {
		if !poison[m.UUID] {
			continue
		}
		key, seq, err := parseEntry(m)
		if err != nil {
			t.Fatal(err)
		}
		p[key] = append(p[key], struct {
			seq  int
			uuid string
		}{seq, m.UUID})
	}
	return p
}

// before returns the poisons of m's key before it.
func (p poisons) before(m *message.Message) []string {
	key, seq, _ := parseEntry(m)
	var out []string
	for _, x := range p[key] {
		if x.seq < seq {
			out = append(out, x.uuid)
		}
	}
	return out
}

// TestBatchNamedFailureCommitsTheMessagesBeforeIt: a batch holds six
// messages of one key and its handler names one of them, the fourth. The
// three before it run again at once, in the batch's own run, and commit
// before it is dead-lettered; the two after it wait for the dead letter.
// Were the three requeued with the two, the dead letter would free the two
// while the three waited for a new batch, and a later message of the key
// could commit before an earlier one. When the run again names the
// second, the second fails in the fourth's place and the fourth waits too.
func TestBatchNamedFailureCommitsTheMessagesBeforeIt(t *testing.T) {
	cases := []struct {
		name  string
		fails func(seqs []int) int // the seq the handler names, or -1
		dead  int                  // messages dead-lettered
		want  []string
	}{{
		name:  "one",
		fails: func(seqs []int) int { return whenIn(seqs, 3) },
		dead:  1,
		want:  []string{"[0 1 2 3 4 5] named 3", "[0 1 2]", "[4 5] after 3"},
	}, {
		name:  "an earlier one in the run again",
		fails: func(seqs []int) int { return max(whenIn(seqs, 3), whenIn(seqs, 1)) },
		dead:  2,
		want:  []string{"[0 1 2 3 4 5] named 3", "[0 1 2] named 1", "[0]", "[2 3 4 5] after 1 named 3", "[2] after 1", "[4 5] after 1 3"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { namedFailureOrder(t, c.fails, c.dead, c.want) })
	}
}

// whenIn returns seq when seqs holds it, else -1.
func whenIn(seqs []int, seq int) int {
	if slices.Contains(seqs, seq) {
		return seq
	}
	return -1
}

func namedFailureOrder(t *testing.T, fails func([]int) int, dead int, want []string) {
	const n = 6
	env := newKafkaEnv(t)
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	store, lg := postgresStoreIn(t, pool, schema), newLedger(t, pool, schema, 1, true)
	topic := env.topic(t, "named-order")
	msgs := keyedMessages(1, n)
	env.publish(t, topic, msgs...)

	dl := &sentLetters{Publisher: env.pub, sent: map[string]string{}}
	rig := newBatchRig(t, env, topic, middleware.Config{Publisher: dl, Store: store, Idempotency: middleware.IdempotencyConfig{Transactional: true}},
		broker.BatchConfig{MaxMessages: n, MaxWait: 2 * time.Second})
	var mu sync.Mutex
	var calls []string // each call's seqs, the messages dead-lettered by then, and the one it names
	rig.run(t, func(ctx context.Context, batch []*message.Message) error {
		seqs := make([]int, len(batch))
		for i, m := range batch {
			_, seqs[i], _ = parseEntry(m)
		}
		call := fmt.Sprint(seqs)
		var dead []string
		for seq, m := range msgs {
			if _, ok := dl.reason(m.UUID); ok {
				dead = append(dead, strconv.Itoa(seq))
			}
		}
		if len(dead) > 0 {
			call += " after " + strings.Join(dead, " ")
		}
		bad := fails(seqs)
		if bad >= 0 {
			call += " named " + strconv.Itoa(bad)
		}
		mu.Lock()
		calls = append(calls, call)
		mu.Unlock()
		if bad >= 0 {
			return middleware.FailMessages(map[*message.Message]error{batch[slices.Index(seqs, bad)]: koto.Poison(errors.New("bad message"))})
		}
		return lg.write(ctx, batch)
	})
	kototest.WaitFor(t, "the others in the ledger and the named ones dead-lettered", func() bool {
		return lg.rows() >= n-dead && dl.count() >= dead
	})
	if rows := lg.rows(); rows != n-dead {
		t.Errorf("ledger has %d rows, want %d", rows, n-dead)
	}
	lg.checkDistinct(t)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(calls, want) {
		t.Errorf("handler calls %q, want %q", calls, want)
	}
}

// TestBatchOutageRetriesTheWholeBatch: PostgreSQL cut while batches run:
// they fail as outages and run again once it is back; nothing is
// dead-lettered, lost or written twice.
func TestBatchOutageRetriesTheWholeBatch(t *testing.T) {
	const keys, perKey = 20, 100
	env := newKafkaEnv(t)
	direct := pgtest.Pool(t)
	schema := pgtest.Schema(t, direct)
	pool, proxy := pgtest.ProxiedPool(t)
	store, lg := postgresStoreIn(t, pool, schema), newLedger(t, direct, schema, keys, false)
	topic := env.topic(t, "outage")
	msgs := keyedMessages(keys, perKey)

	dl := &sentLetters{Publisher: env.pub, sent: map[string]string{}}
	logs := &logCapture{}
	rig := newBatchRig(t, env, topic, middleware.Config{Publisher: dl, Store: store, Logger: logs.logger(),
		Idempotency: middleware.IdempotencyConfig{Transactional: true, StoreTimeout: time.Second}},
		broker.BatchConfig{MaxMessages: 100, MaxWait: 10 * time.Millisecond})
	rig.run(t, lg.write)
	env.publish(t, topic, msgs[:500]...)
	kototest.WaitFor(t, "the first messages in the ledger", func() bool { return lg.rows() > 0 })
	proxy.Cut()
	env.publish(t, topic, msgs[500:]...)
	kototest.WaitFor(t, "batches failing as outages", func() bool {
		return len(where(logs.lines(t), "msg", "batch failed, retrying")) >= 3
	})
	proxy.Restore()
	kototest.WaitFor(t, "every message in the ledger", func() bool { return lg.rows() >= len(msgs) })
	lg.check(t, keys, perKey)
	if n := dl.count(); n != 0 {
		t.Errorf("%d dead letters, want none: an outage is waited out", n)
	}
}
