package parking_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/twmb/franz-go/pkg/kgo"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/dlqmeta"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/parking"
)

// errFlaky is the tests' retryable failure.
var errFlaky = errors.New("flaky dependency")

// TestParkedMessagesKeepTheirKeysOrder: 40 keys × 20 messages on 4
// partitions, a consumer of Concurrency 8 in the transactional mode with
// two attempts in place and two parkings. One message in 20 fails its
// first 3 attempts (parked once), one in 40 its first 5 (parked twice):
// each key's effects are written once each, in offset order, and the
// parking table ends empty.
func TestParkedMessagesKeepTheirKeysOrder(t *testing.T) {
	const n = 20
	e := newEnv(t)
	topic := e.topic("order", 4)
	ks := keys("k", 40)
	group := kototest.Group(t, "order")
	fails := func(it item) int {
		h := (it.Idx*31 + len(it.Key)*7 + int(it.Key[len(it.Key)-1])) % 40
		switch {
		case h == 0:
			return 5
		case h == 1:
			return 3
		}
		return 0
	}
	e.run(consumer{group: group, topic: topic, concurrency: 8, maxAttempts: 2,
		delays: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond},
		fail: func(it item, attempt int) error {
			if attempt <= fails(it) {
				return errFlaky
			}
			return nil
		}})
	e.publish(topic, ks, n)
	kototest.WaitFor(t, "every effect", func() bool { return e.count(group) >= len(ks)*n })
	kototest.WaitFor(t, "the parking table to empty", func() bool { return e.parkedRows() == 0 })
	inOrder(t, e.effects(group), ks, n)
	if got := e.count(group); got != len(ks)*n {
		t.Errorf("%d effects, want %d", got, len(ks)*n)
	}
}

// TestParkedTiersEndInTheDeadLetter: a message that fails every attempt
// is parked at each delay and then dead-lettered, with the history of its
// parkings and its original position, and without the parking's metadata;
// its key's later messages run after it, in order.
func TestParkedTiersEndInTheDeadLetter(t *testing.T) {
	e := newEnv(t)
	topic := e.topic("tiers", 1)
	group := kototest.Group(t, "tiers")
	dlq := watchDeadLetters(t, e.brokers, group)
	e.run(consumer{group: group, topic: topic, maxAttempts: 1,
		delays: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
		fail: func(it item, _ int) error {
			if it.Idx == 0 {
				return fmt.Errorf("%w: item %d", errFlaky, it.Idx)
			}
			return nil
		}})
	e.publish(topic, []string{"k"}, 3)
	dl := kototest.Receive(t, dlq, "the dead letter")
	kototest.WaitFor(t, "the later messages", func() bool { return e.count(group) == 2 })
	if got := e.effects(group)["k"]; fmt.Sprint(got) != "[1 2]" {
		t.Errorf("effects %v, want [1 2]", got)
	}
	checkDeadLetter(t, dl, 2, "0")
	kototest.WaitFor(t, "the parking table to empty", func() bool { return e.parkedRows() == 0 })
}

// TestRetryAfterParksAtOnce: a handler error marked koto.RetryAfter is
// parked at once, without the attempts in place, and comes back no
// sooner than it asked.
func TestRetryAfterParksAtOnce(t *testing.T) {
	e := newEnv(t)
	topic := e.topic("later", 1)
	group := kototest.Group(t, "later")
	var first time.Time
	_, calls := e.run(consumer{group: group, topic: topic, maxAttempts: 5, delays: []time.Duration{time.Hour},
		fail: func(it item, attempt int) error {
			if attempt == 1 {
				first = time.Now()
				return koto.RetryAfter(errFlaky, 300*time.Millisecond)
			}
			if since := time.Since(first); since < 300*time.Millisecond {
				return koto.Poison(fmt.Errorf("back after %v, before the 300ms it asked for", since))
			}
			return nil
		}})
	e.publish(topic, []string{"k"}, 1)
	kototest.WaitFor(t, "the effect", func() bool { return e.count(group) == 1 })
	if n := calls.Get("k/0"); n != 2 {
		t.Errorf("%d handler calls, want 2: one parked at once, one after the delay", n)
	}
}

// TestOtherGroupsSkipTheRedelivery: a parked message comes back through
// its topic, which another consumer group reads too; that group, which
// handled the message once, skips the copy, though it keeps no
// idempotency store.
func TestOtherGroupsSkipTheRedelivery(t *testing.T) {
	e := newEnv(t)
	topic := e.topic("shared", 1)
	parker, other := kototest.Group(t, "parker"), kototest.Group(t, "other")
	e.run(consumer{group: parker, topic: topic, maxAttempts: 1, delays: []time.Duration{50 * time.Millisecond},
		fail: func(it item, attempt int) error {
			if attempt == 1 {
				return errFlaky
			}
			return nil
		}})
	_, calls := e.runPlain(other, topic)
	e.publish(topic, []string{"k"}, 3)
	kototest.WaitFor(t, "the parked group's effects", func() bool { return e.count(parker) == 3 })
	kototest.WaitFor(t, "the parking table to empty", func() bool { return e.parkedRows() == 0 })
	kototest.WaitFor(t, "the other group's calls", func() bool { return calls.Total() >= 3 })
	// The copies come after the originals on the one partition: once the
	// other group has read them all, it has skipped them.
	kototest.WaitCommitted(t, e.brokers, other, topic, kototest.Records(t, e.brokers, topic))
	if calls.Total() != 3 || calls.Distinct() != 3 {
		t.Errorf("the other group ran its handler %d times for %d messages, want 3 for 3", calls.Total(), calls.Distinct())
	}
}

// TestParkedKeysSurviveARestart: a key parked by one consumer is known to
// the next one of its group, which parks the key's new message behind it;
// run now, the parked one comes back and the new one follows, in order.
func TestParkedKeysSurviveARestart(t *testing.T) {
	e := newEnv(t)
	topic := e.topic("restart", 2)
	group := kototest.Group(t, "restart")
	var failed atomic.Bool // k/0, once, by the first consumer
	c := consumer{group: group, topic: topic, maxAttempts: 1, delays: []time.Duration{time.Hour},
		fail: func(it item, _ int) error {
			if it.Key == "k" && it.Idx == 0 && failed.CompareAndSwap(false, true) {
				return errFlaky
			}
			return nil
		}}
	stop, _ := e.run(c)
	e.publish(topic, []string{"k"}, 1)
	kototest.WaitFor(t, "k/0 parked", func() bool { return e.parkedRows() == 1 })
	stop()
	e.run(c)
	if err := e.pub.Publish(topic, itemMessage("k", 1), itemMessage("other", 0)); err != nil {
		t.Fatal(err)
	}
	kototest.WaitFor(t, "the other key's effect", func() bool { return e.count(group) == 1 })
	kototest.WaitFor(t, "k/1 parked behind k/0", func() bool { return e.parkedRows() == 2 })
	entries, err := e.parked.List(kototest.Context(t), group, 10)
	if err != nil || len(entries) != 2 {
		t.Fatalf("List: %v, %v", entries, err)
	}
	if err := e.parked.RunNow(kototest.Context(t), entries[1].ID); !errors.Is(err, parking.ErrNotFirst) {
		t.Errorf("RunNow of the one behind: %v, want ErrNotFirst", err)
	}
	if err := e.parked.RunNow(kototest.Context(t), entries[0].ID); err != nil {
		t.Fatalf("RunNow: %v", err)
	}
	kototest.WaitFor(t, "k's effects", func() bool { return e.count(group) == 3 })
	inOrder(t, e.effects(group), []string{"k"}, 2)
}

// TestOperatorRunsOrDeadLettersAParkedMessage: Status counts each group's
// parked messages and keys; a message parked for an hour, run now, comes
// back at once and its key's next follows; one dead-lettered by an
// operator reaches the dead-letter topic without a handler call, and its
// key moves on. Unknown IDs are ErrNotParked.
func TestOperatorRunsOrDeadLettersAParkedMessage(t *testing.T) {
	e := newEnv(t)
	topic := e.topic("operator", 1)
	group := kototest.Group(t, "operator")
	dlq := watchDeadLetters(t, e.brokers, group)
	_, calls := e.run(consumer{group: group, topic: topic, maxAttempts: 1, delays: []time.Duration{time.Hour},
		fail: func(it item, attempt int) error {
			if it.Idx == 0 && attempt == 1 {
				return errFlaky
			}
			return nil
		}})
	e.publish(topic, []string{"run", "dead"}, 2)
	kototest.WaitFor(t, "four messages parked", func() bool { return e.parkedRows() == 4 })
	ctx := kototest.Context(t)
	st, err := e.parked.Status(ctx)
	if err != nil || len(st) != 1 || st[0].Group != group || st[0].Keys != 2 || st[0].Messages != 4 ||
		st[0].Oldest.IsZero() || time.Until(st[0].NextDue) < 50*time.Minute {
		t.Fatalf("Status: %+v, %v; want %s with 2 keys, 4 messages, the next due in an hour", st, err, group)
	}
	first := map[string]string{} // the first parked message of each key
	entries, err := e.parked.List(ctx, group, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if _, ok := first[string(en.Position.Key)]; !ok {
			first[string(en.Position.Key)] = en.ID
		}
	}
	if err := e.parked.RunNow(ctx, first["run"]); err != nil {
		t.Fatalf("RunNow: %v", err)
	}
	if err := e.parked.DeadLetter(ctx, first["dead"]); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}
	dl := kototest.Receive(t, dlq, "the dead letter")
	kototest.WaitFor(t, "the effects", func() bool { return e.count(group) == 3 })
	kototest.WaitFor(t, "the parking table to empty", func() bool { return e.parkedRows() == 0 })
	fx := e.effects(group)
	inOrder(t, fx, []string{"run"}, 2)
	if fmt.Sprint(fx["dead"]) != "[1]" {
		t.Errorf("effects of the dead-lettered key %v, want [1]", fx["dead"])
	}
	if n := calls.Get("dead/0"); n != 1 {
		t.Errorf("dead/0 was handled %d times, want once: dead-lettered without a call", n)
	}
	checkDeadLetter(t, dl, 1, "1")
	if r := dl.Metadata.Get(dlqmeta.Reason); !strings.Contains(r, "operator") {
		t.Errorf("dead letter's reason %q, want the operator's", r)
	}
	if err := e.parked.RunNow(ctx, first["run"]); !errors.Is(err, parking.ErrNotParked) {
		t.Errorf("RunNow of a message no longer parked: %v, want ErrNotParked", err)
	}
}

// TestParkedMessagesHoldNoSlot: with Concurrency 2 on one partition, the
// first messages of four keys ask to be tried again in an hour and are
// parked; the messages of four other keys go on, every one of them,
// though four parked messages would fill twice the slots the subscriber
// has. Run now, the parked ones come back, each before its key's next.
func TestParkedMessagesHoldNoSlot(t *testing.T) {
	e := newEnv(t)
	topic := e.topic("slots", 1)
	group := kototest.Group(t, "slots")
	parked, free := keys("parked", 4), keys("free", 4)
	var ran atomic.Bool // the operator ran the parked ones
	e.run(consumer{group: group, topic: topic, concurrency: 2, maxAttempts: 3, delays: []time.Duration{time.Hour},
		fail: func(it item, _ int) error {
			if strings.HasPrefix(it.Key, "parked") && it.Idx == 0 && !ran.Load() {
				return koto.RetryAfter(errFlaky, time.Hour)
			}
			return nil
		}})
	e.publish(topic, parked, 1)
	e.publishFrom(topic, free, 0, 5)
	e.publishFrom(topic, parked, 1, 6)
	kototest.WaitFor(t, "the free keys' messages", func() bool {
		fx := e.effects(group)
		for _, k := range free {
			if len(fx[k]) != 5 {
				return false
			}
		}
		return true
	})
	kototest.WaitFor(t, "the parked keys' messages parked", func() bool { return e.parkedRows() == 4*6 })
	ctx := kototest.Context(t)
	st, err := e.parked.Status(ctx)
	if err != nil || len(st) != 1 || st[0].Keys != 4 || st[0].Messages != 4*6 {
		t.Fatalf("Status: %+v, %v; want 4 keys with 24 messages parked", st, err)
	}
	ran.Store(true)
	entries, err := e.parked.List(ctx, group, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if !en.DueAt.IsZero() {
			if err := e.parked.RunNow(ctx, en.ID); err != nil {
				t.Fatalf("RunNow %s: %v", en.ID, err)
			}
		}
	}
	kototest.WaitFor(t, "the parking table to empty", func() bool { return e.parkedRows() == 0 })
	inOrder(t, e.effects(group), parked, 6)
}

// TestUnparkableMessageIsDeadLettered: a failing message whose header is
// not UTF-8 cannot come back through the outbox; rather than retried for
// ever, it is dead-lettered at once with the handler's error and the
// reason it could not be parked, and its key's next message runs.
func TestUnparkableMessageIsDeadLettered(t *testing.T) {
	e := newEnv(t)
	topic := e.topic("unparkable", 1)
	group := kototest.Group(t, "unparkable")
	dlq := watchDeadLetters(t, e.brokers, group)
	e.run(consumer{group: group, topic: topic, maxAttempts: 1, delays: []time.Duration{time.Minute},
		fail: func(it item, _ int) error {
			if it.Idx == 0 {
				return errFlaky
			}
			return nil
		}})
	bad := kototest.Record(topic, "01900000-0000-7000-8000-0000000000b1", "k", []byte(`{"key":"k","idx":0}`))
	bad.Headers = append(bad.Headers, kgo.RecordHeader{Key: "note", Value: []byte{0xff, 0xfe}})
	kototest.Produce(t, e.brokers, []*kgo.Record{bad, kototest.Record(topic, "01900000-0000-7000-8000-0000000000b2", "k", []byte(`{"key":"k","idx":1}`))})
	dl := kototest.Receive(t, dlq, "the dead letter")
	if r := dl.Metadata.Get(dlqmeta.Reason); !strings.Contains(r, "flaky dependency") || !strings.Contains(r, "not valid UTF-8") {
		t.Errorf("dead letter's reason %q, want the handler's error and why it could not be parked", r)
	}
	kototest.WaitFor(t, "the key's next message", func() bool { return e.count(group) == 1 })
	if n := e.parkedRows(); n != 0 {
		t.Errorf("%d rows in the parking table", n)
	}
}

// TestBatchMembersPark: with a batch handler (middleware.BatchDefaults),
// parking is per message too: a member that keeps failing is parked on
// its own, its key's later messages behind it, and all of them come back
// in order, while the other keys' batches commit.
func TestBatchMembersPark(t *testing.T) {
	e := newEnv(t)
	topic := e.topic("batch", 2)
	group := kototest.Group(t, "batch")
	ks := keys("b", 8)
	failed := map[string]int{}
	var mu sync.Mutex
	chain, err := middleware.BatchDefaults(middleware.Config{
		Publisher: e.pub, Store: e.store, Logger: kototest.Logger(slog.LevelWarn),
		Idempotency: middleware.IdempotencyConfig{Transactional: true},
		DeadLetter: middleware.DeadLetterConfig{MaxAttempts: 1, Backoff: fast,
			Parking: middleware.ParkingConfig{Store: e.parked, Delays: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}}},
	}, middleware.BatchConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = chain.Close(context.Background()) })
	sub, err := broker.NewBatchSubscriber(broker.Config{Brokers: e.brokers, ConsumerGroup: group, Sarama: kototest.QuickGroupSession,
		Batch: broker.BatchConfig{MaxMessages: 20, MaxWait: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelWarn))
	r.AddConsumerHandler(group, topic, sub, chain.Handler(func(ctx context.Context, msgs []*message.Message) error {
		tx, _ := postgres.TxFromContext(ctx)
		errs := map[*message.Message]error{}
		for _, m := range msgs {
			var it item
			if err := json.Unmarshal(m.Payload, &it); err != nil {
				return koto.Poison(err)
			}
			mu.Lock()
			fail := it.Idx == 3 && it.Key == "b-002" && failed[it.Key] < 2
			if fail {
				failed[it.Key]++
			}
			mu.Unlock()
			if fail {
				errs[m] = errFlaky
				continue
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+e.schema+".effects (key, idx, grp) VALUES ($1, $2, $3)", it.Key, it.Idx, group); err != nil {
				return err
			}
		}
		return middleware.FailMessages(errs)
	}))
	kototest.RunRouter(t, r)
	e.publish(topic, ks, 10)
	kototest.WaitFor(t, "every effect", func() bool { return e.count(group) == len(ks)*10 })
	kototest.WaitFor(t, "the parking table to empty", func() bool { return e.parkedRows() == 0 })
	inOrder(t, e.effects(group), ks, 10)
	mu.Lock()
	defer mu.Unlock()
	if failed["b-002"] != 2 {
		t.Errorf("b-002/3 failed %d times, want 2: parked after each", failed["b-002"])
	}
}
