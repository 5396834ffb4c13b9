package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/internal/dlqmeta"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// These tests hand the batch chain batches as a batch subscriber would,
// without Kafka: each message with its position, settled through its
// koto.Batch.

// settlements records how each message of a batch was settled, in order.
type settlements struct {
	mu    sync.Mutex
	order []string // "ack k/seq" or "nack k/seq"
}

func (s *settlements) add(msg *message.Message, acked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	verb := "nack"
	if acked {
		verb = "ack"
	}
	s.order = append(s.order, verb+" "+string(msg.Payload))
}

func (s *settlements) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order...)
}

// batchOf returns the batch of msgs, at offsets from first on, each with
// its key as its record key; ctx is each message's context's parent.
func batchOf(ctx context.Context, s *settlements, first int64, msgs ...*message.Message) *message.Message {
	for i, m := range msgs {
		key, _, _ := strings.Cut(string(m.Payload), "/")
		m.SetContext(koto.ContextWithPosition(ctx, koto.Position{Topic: "ledger", Offset: first + int64(i), Key: []byte(key)}))
	}
	b := koto.NewBatch(msgs, func(i int, acked bool) { s.add(msgs[i], acked) })
	env := message.NewMessage(watermill.NewUUID(), nil)
	env.SetContext(koto.ContextWithBatch(context.Background(), b))
	return env
}

// entries returns a message per "key/seq".
func entries(list ...string) []*message.Message {
	msgs := make([]*message.Message, len(list))
	for i, e := range list {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(e))
	}
	return msgs
}

// letterBox records the dead letters a chain sends.
type letterBox struct {
	mu      sync.Mutex
	reasons map[string]string // payload → reason
}

func (l *letterBox) Publish(_ string, msgs ...*message.Message) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		l.reasons[string(m.Payload)] = m.Metadata.Get(dlqmeta.Reason)
	}
	return nil
}

func (l *letterBox) Close() error { return nil }

func (l *letterBox) get() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]string{}
	for k, v := range l.reasons {
		out[k] = v
	}
	return out
}

// runnerChain is a transactional batch chain on a store and ledger of the
// test's own, sending dead letters to box.
func runnerChain(t *testing.T, keys int) (*middleware.BatchChain, *ledger, *letterBox) {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	box := &letterBox{reasons: map[string]string{}}
	chain, err := middleware.BatchDefaults(middleware.Config{
		Publisher: box, Store: postgresStoreIn(t, pool, schema), Logger: kototest.Logger(0),
		Idempotency: middleware.IdempotencyConfig{Transactional: true},
		DeadLetter: middleware.DeadLetterConfig{Topic: "ledger.dlq", MaxAttempts: 3,
			Backoff: koto.Backoff{InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond}},
	}, middleware.BatchConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = chain.Close(context.Background()) })
	return chain, newLedger(t, pool, schema, keys, true), box
}

// TestBatchRunnerNamedFailures: in one batch of two keys, k0/1 is poison
// and k1/1 fails once with a retryable error. Everything else commits in
// the first run; k0/1 is dead-lettered and k1/1 retried alone, each
// before the later messages of its key, which then commit in order.
func TestBatchRunnerNamedFailures(t *testing.T) {
	chain, lg, box := runnerChain(t, 2)
	var s settlements
	tries := map[string]int{}
	var calls []string
	handle := chain.Handler(func(ctx context.Context, msgs []*message.Message) error {
		var names []string
		failed := map[*message.Message]error{}
		var good []*message.Message
		for _, m := range msgs {
			names = append(names, string(m.Payload))
			switch p := string(m.Payload); {
			case p == "k0/1":
				failed[m] = koto.Poison(errors.New("bad k0/1"))
			case p == "k1/1" && tries[p] == 0:
				tries[p]++
				failed[m] = errors.New("k1/1 not yet")
			default:
				good = append(good, m)
			}
		}
		calls = append(calls, strings.Join(names, " "))
		if len(failed) > 0 {
			return middleware.FailMessages(failed)
		}
		return lg.write(ctx, good)
	})
	env := batchOf(context.Background(), &s, 0, entries("k0/0", "k1/0", "k0/1", "k1/1", "k0/2", "k1/2", "k0/3")...)
	if err := handle(env); err != nil {
		t.Fatalf("handle = %v", err)
	}
	want := []string{
		"k0/0 k1/0 k0/1 k1/1 k0/2 k1/2 k0/3", // both named
		"k0/0 k1/0",                          // the rest, without them and what follows them
		"k1/1",                               // the retry, alone
		"k0/2 k0/3",                          // behind the dead letter
		"k1/2",                               // behind the retry
	}
	if strings.Join(calls, " | ") != strings.Join(want, " | ") {
		// The last two may run together, in one batch.
		t.Logf("handler calls: %q", calls)
	}
	if got := box.get(); len(got) != 1 || got["k0/1"] != "bad k0/1" {
		t.Errorf("dead letters %v, want k0/1 alone with its reason", got)
	}
	order := s.all()
	index := func(e string) int {
		for i, o := range order {
			if o == e {
				return i
			}
		}
		t.Fatalf("%s not in %v", e, order)
		return -1
	}
	for _, before := range [][2]string{{"ack k0/1", "ack k0/2"}, {"ack k1/1", "ack k1/2"}, {"ack k0/0", "ack k0/1"}} {
		if index(before[0]) > index(before[1]) {
			t.Errorf("%s after %s: %v", before[0], before[1], order)
		}
	}
	if len(order) != 7 {
		t.Errorf("settled %v, want all 7 acked", order)
	}
	if n := lg.rows(); n != 6 {
		t.Errorf("%d ledger rows, want 6", n)
	}
	lg.checkDistinct(t)
}

// TestBatchRunnerBisects: an error that names nothing is narrowed down to
// the message that fails, dead-lettered, in at most 2⌈log₂n⌉+1 calls; the
// other messages commit once.
func TestBatchRunnerBisects(t *testing.T) {
	const n = 64
	chain, lg, box := runnerChain(t, n)
	var list []string
	for i := range n {
		list = append(list, fmt.Sprintf("k%d/0", i))
	}
	calls := 0
	handle := chain.Handler(func(ctx context.Context, msgs []*message.Message) error {
		calls++
		for _, m := range msgs {
			if string(m.Payload) == "k37/0" {
				return koto.Poison(errors.New("something in here is bad"))
			}
		}
		return lg.write(ctx, msgs)
	})
	var s settlements
	if err := handle(batchOf(context.Background(), &s, 0, entries(list...)...)); err != nil {
		t.Fatal(err)
	}
	if got := box.get(); len(got) != 1 || got["k37/0"] == "" {
		t.Errorf("dead letters %v, want k37/0 alone", got)
	}
	if rows := lg.rows(); rows != n-1 {
		t.Errorf("%d rows, want %d", rows, n-1)
	}
	if calls > 13 {
		t.Errorf("%d handler calls, want at most 2⌈log₂ 64⌉+1 = 13", calls)
	}
	if len(s.all()) != n {
		t.Errorf("%d settled, want %d", len(s.all()), n)
	}
}

// TestBatchRunnerNacksWhatItCannotFinish: a message whose delivery ends
// (its partition revoked) while it waits for a retry is nacked, and so are
// the messages behind it in its key; the others were acked.
func TestBatchRunnerNacksWhatItCannotFinish(t *testing.T) {
	chain, lg, _ := runnerChain(t, 2)
	ctx, revoke := context.WithCancel(context.Background())
	handle := chain.Handler(func(c context.Context, msgs []*message.Message) error {
		for _, m := range msgs {
			if string(m.Payload) == "k0/1" {
				revoke() // the partition goes while the batch runs
				return middleware.FailMessages(map[*message.Message]error{m: errors.New("not now")})
			}
		}
		return lg.write(c, msgs)
	})
	var s settlements
	if err := handle(batchOf(ctx, &s, 0, entries("k0/0", "k1/0", "k0/1", "k0/2")...)); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(s.all(), ", ")
	for _, want := range []string{"nack k0/1", "nack k0/2"} {
		if !strings.Contains(got, want) {
			t.Errorf("settled %s, want %s", got, want)
		}
	}
	if strings.Contains(got, "ack k0/2") && !strings.Contains(got, "nack k0/2") {
		t.Errorf("k0/2 acked before k0/1: %s", got)
	}
}

// TestBatchRunnerSingleMessages: a message from a subscriber of single
// messages is a batch of its own, acked by a nil return.
func TestBatchRunnerSingleMessages(t *testing.T) {
	chain, lg, _ := runnerChain(t, 1)
	handle := chain.Handler(lg.write)
	msg := entries("k0/0")[0]
	msg.SetContext(koto.ContextWithPosition(context.Background(), koto.Position{Topic: "ledger", Key: []byte("k0")}))
	if err := handle(msg); err != nil {
		t.Fatal(err)
	}
	if n := lg.rows(); n != 1 {
		t.Errorf("%d rows, want 1", n)
	}
}
