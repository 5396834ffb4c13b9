package outbox_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
)

// dueKey is the metadata in which the tests' scheduled messages carry
// their due time.
const dueKey = "test_due"

// scheduled is a message for a schedule at at, on key, carrying its due
// time.
func scheduled(payload, key string, at time.Time) *message.Message {
	msg := newMsg(payload, key)
	msg.Metadata.Set(dueKey, at.Format(time.RFC3339Nano))
	return msg
}

// schedule commits one transaction that schedules msgs for topic, each at
// its due time, and returns their IDs.
func (e *env) schedule(topic string, msgs ...*message.Message) []string {
	e.t.Helper()
	ids := make([]string, len(msgs))
	err := e.o.Transact(kototest.Context(e.t), func(ctx context.Context, tx pgx.Tx) error {
		for i, msg := range msgs {
			at, err := time.Parse(time.RFC3339Nano, msg.Metadata.Get(dueKey))
			if err != nil {
				return err
			}
			if ids[i], err = e.o.Publisher(tx).Schedule(at, topic, msg); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return ids
}

// newTopicEnv is newEnv with a topic named after prefix and a reader of
// it.
func newTopicEnv(t *testing.T, prefix string) (*env, string, *reader) {
	t.Helper()
	e := newEnv(t)
	topic := kototest.Topic(t, prefix)
	return e, topic, newReader(t, e.brokers, topic)
}

// scheduledRows counts the rows of the scheduled table.
func (e *env) scheduledRows() int {
	e.t.Helper()
	return int(pgtest.QueryInt(e.t, e.pool, "SELECT count(*) FROM "+e.schema+".outbox_scheduled"))
}

// notEarly checks that each record was produced at or after the due time
// it carries; Kafka's timestamps have milliseconds, and schedules are due
// to the millisecond, rounded up.
func notEarly(t *testing.T, recs []record) {
	t.Helper()
	for _, r := range recs {
		due, err := time.Parse(time.RFC3339Nano, r.Headers[dueKey])
		if err != nil {
			t.Fatalf("record %s: due %q: %v", r.Payload, r.Headers[dueKey], err)
		}
		if r.Timestamp.Before(due.Truncate(time.Millisecond)) {
			t.Errorf("%s was produced at %s, before its time %s", r.Payload, r.Timestamp.Format(time.RFC3339Nano), due.Format(time.RFC3339Nano))
		}
	}
}

// TestScheduledMessagesFireAtTheirTime: messages scheduled in no
// particular order, 3 ms apart, reach Kafka in the order of their due
// times, none before its time, one already due at once, with their UUIDs, metadata
// and keys; the forwarder polls only once an hour, so the wake-up at the
// next due time fires them. The scheduled table keeps nothing sent.
func TestScheduledMessagesFireAtTheirTime(t *testing.T) {
	e, topic, r := newTopicEnv(t, "scheduled")
	cfg := e.forwarderConfig()
	cfg.PollInterval = time.Hour
	e.startForwarder(cfg)

	now := time.Now()
	offsets := []int{-3_600_000} // ms from now: one an hour late, 40 from 200 ms on, 3 ms apart, in no order
	for _, i := range rand.Perm(40) {
		offsets = append(offsets, 200+3*i)
	}
	msgs := make([]*message.Message, len(offsets))
	for i, ms := range offsets {
		msgs[i] = scheduled(strconv.Itoa(ms), "k", now.Add(time.Duration(ms)*time.Millisecond))
		msgs[i].Metadata.Set("note", "kept")
	}
	e.schedule(topic, msgs...)
	recs := r.next(len(msgs))
	notEarly(t, recs)
	slices.Sort(offsets)
	want := make([]string, len(offsets))
	for i, ms := range offsets {
		want[i] = strconv.Itoa(ms)
	}
	if got := payloadsOf(recs); got != strings.Join(want, ",") {
		t.Errorf("fired in the order %s, want %s", got, strings.Join(want, ","))
	}
	for i, rec := range recs {
		if rec.Key != "k" || rec.Headers["note"] != "kept" || rec.UUID == "" {
			t.Errorf("record %d: key %q, note %q, uuid %q; want the message's", i, rec.Key, rec.Headers["note"], rec.UUID)
		}
	}
	kototest.WaitFor(t, "the outbox to empty", func() bool { return e.rows() == 0 })
	if n := e.scheduledRows(); n != 0 {
		t.Errorf("%d rows left in the scheduled table", n)
	}
}

// TestScheduleWakesForAnEarlierOne: with one message due in an hour and a
// forwarder that polls once an hour, a message scheduled later but due
// sooner still fires: its commit notifies the forwarder of its due time.
func TestScheduleWakesForAnEarlierOne(t *testing.T) {
	e, topic, r := newTopicEnv(t, "earlier")
	cfg := e.forwarderConfig()
	cfg.PollInterval = time.Hour
	f := e.startForwarder(cfg)
	e.schedule(topic, scheduled("later", "k", time.Now().Add(time.Hour)))
	kototest.WaitFor(t, "the forwarder to be active", f.Active)
	e.schedule(topic, scheduled("sooner", "k", time.Now().Add(200*time.Millisecond)))
	recs := r.next(1)
	notEarly(t, recs)
	if recs[0].Payload != "sooner" {
		t.Errorf("got %q, want sooner", recs[0].Payload)
	}
	if n := e.scheduledRows(); n != 1 {
		t.Errorf("%d rows in the scheduled table, want the one due in an hour", n)
	}
}

// TestScheduleRolledBack: a schedule written in a transaction that rolls
// back is never sent, and Cancel does not know it; a later one, due
// after it on the same key, arrives first.
func TestScheduleRolledBack(t *testing.T) {
	e, topic, r := newTopicEnv(t, "rollback")
	e.startForwarder(e.forwarderConfig())
	errRollback := errors.New("roll back")
	var rolledBack string
	err := e.o.Transact(kototest.Context(t), func(ctx context.Context, tx pgx.Tx) error {
		msg := newMsg("rolled back", "k")
		msg.SetContext(ctx)
		var err error
		if rolledBack, err = e.o.ContextPublisher().Schedule(time.Now().Add(-time.Second), topic, msg); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Transact: %v", err)
	}
	e.schedule(topic, scheduled("committed", "k", time.Now()))
	if got := payloadsOf(r.next(1)); got != "committed" {
		t.Fatalf("first record %q, want committed", got)
	}
	err = e.o.AutoTxPublisher().Cancel(kototest.Context(t), rolledBack)
	if !errors.Is(err, outbox.ErrUnknownSchedule) {
		t.Errorf("Cancel of the rolled-back schedule: %v, want ErrUnknownSchedule", err)
	}
	if n := e.scheduledRows(); n != 0 {
		t.Errorf("%d rows in the scheduled table", n)
	}
}

// TestCancel: of 1 000 messages due over half a second, 500 are cancelled
// by four goroutines, from the first send on, while the forwarder fires
// the others. Each Cancel says
// whether it came first (nil) or the send did (ErrSent), and Kafka gets
// exactly the messages not cancelled in time, once each. Cancelling again
// says ErrCancelled; cancelling one that was sent, ErrSent; an ID that
// names nothing, ErrUnknownSchedule.
func TestCancel(t *testing.T) {
	const n = 1000
	e, topic, r := newTopicEnv(t, "cancel")
	now := time.Now()
	var ids []string
	for batch := 0; batch < n; batch += 100 {
		msgs := make([]*message.Message, 100)
		for i := range msgs {
			k := batch + i
			msgs[i] = scheduled(strconv.Itoa(k), "k"+strconv.Itoa(k%8), now.Add(time.Duration(k)*500*time.Microsecond))
		}
		ids = append(ids, e.schedule(topic, msgs...)...)
	}
	e.startForwarder(e.forwarderConfig())
	kototest.WaitFor(t, "the first send", func() bool { return e.scheduledRows() < n })

	cancelled := make([]error, n) // the first Cancel's answer, for the odd ones
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 1 + 2*g; i < n; i += 8 {
				cancelled[i] = e.o.AutoTxPublisher().Cancel(context.Background(), ids[i])
			}
		})
	}
	wg.Wait()
	want := map[string]bool{}
	lost := 0
	for i := range n {
		switch err := cancelled[i]; {
		case i%2 == 0 || errors.Is(err, outbox.ErrSent):
			want[strconv.Itoa(i)] = true
			lost += i % 2
		case err != nil:
			t.Fatalf("Cancel %d: %v, want nil or ErrSent", i, err)
		}
	}
	t.Logf("%d of %d cancels came after the send", lost, n/2)
	kototest.WaitFor(t, "the schedule and the outbox to empty", func() bool { return e.scheduledRows() == 0 && e.rows() == 0 })
	recs := r.next(int(kototest.Records(t, e.brokers, topic)))
	notEarly(t, recs)
	got := map[string]bool{}
	for _, rec := range recs {
		if got[rec.Payload] {
			t.Errorf("%s sent twice", rec.Payload)
		}
		got[rec.Payload] = true
		if !want[rec.Payload] {
			t.Errorf("%s was sent, though its Cancel returned nil", rec.Payload)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d messages sent, want %d", len(got), len(want))
	}

	ctx := kototest.Context(t)
	pub := e.o.AutoTxPublisher()
	for _, c := range []struct {
		id   string
		want error
	}{
		{ids[0], outbox.ErrSent},
		{ids[1], map[bool]error{true: outbox.ErrCancelled, false: outbox.ErrSent}[cancelled[1] == nil]},
		{uuid.Must(uuid.NewV7()).String(), outbox.ErrUnknownSchedule},
		{"not an id", outbox.ErrUnknownSchedule},
	} {
		if err := pub.Cancel(ctx, c.id); !errors.Is(err, c.want) {
			t.Errorf("Cancel(%s): %v, want %v", c.id, err, c.want)
		}
	}
}

// TestScheduleErrors: the zero time and a negative delay are refused as
// poison and write nothing; a schedule or a cancel without a transaction
// through ContextPublisher is ErrNoTransaction; AutoTxPublisher schedules
// in a transaction of its own, and a zero delay is due at once.
func TestScheduleErrors(t *testing.T) {
	e := newEnv(t)
	topic := kototest.Topic(t, "errors")
	pub := e.o.AutoTxPublisher()
	_, err := pub.Schedule(time.Time{}, topic, newMsg("zero", ""))
	if !errors.Is(err, outbox.ErrInvalidSchedule) || koto.ClassOf(err) != koto.ClassPoison {
		t.Errorf("zero time: %v (%v), want ErrInvalidSchedule, poison", err, koto.ClassOf(err))
	}
	_, err = pub.ScheduleAfter(-time.Second, topic, newMsg("negative", ""))
	if !errors.Is(err, outbox.ErrInvalidSchedule) || koto.ClassOf(err) != koto.ClassPoison {
		t.Errorf("negative delay: %v (%v), want ErrInvalidSchedule, poison", err, koto.ClassOf(err))
	}
	if _, err := pub.Schedule(time.Now(), "bad topic!", newMsg("topic", "")); !errors.Is(err, outbox.ErrInvalidMessage) {
		t.Errorf("a topic Kafka refuses: %v, want ErrInvalidMessage", err)
	}
	if n := e.scheduledRows(); n != 0 {
		t.Errorf("%d rows written by refused schedules", n)
	}
	ctx := kototest.Context(t)
	msg := newMsg("no tx", "")
	msg.SetContext(ctx)
	if _, err := e.o.ContextPublisher().ScheduleAfter(time.Minute, topic, msg); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Errorf("ContextPublisher without a transaction: %v, want ErrNoTransaction", err)
	}
	id, err := pub.ScheduleAfter(0, topic, newMsg("own tx", ""))
	if err != nil {
		t.Fatalf("AutoTxPublisher: %v", err)
	}
	if err := e.o.ContextPublisher().Cancel(ctx, id); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Errorf("Cancel through ContextPublisher without a transaction: %v, want ErrNoTransaction", err)
	}
	s := e.status()
	if s.Scheduled != 1 || s.NextDue.IsZero() || time.Since(s.NextDue) < 0 || s.OldestScheduled.IsZero() {
		t.Errorf("status: %d scheduled since %v, next due %v; want 1, due now", s.Scheduled, s.OldestScheduled, s.NextDue)
	}
	r := newReader(t, e.brokers, topic)
	e.startForwarder(e.forwarderConfig())
	if got := payloadsOf(r.next(1)); got != "own tx" {
		t.Errorf("got %q, want own tx", got)
	}
}

// TestSettledPruned: what became of a schedule is kept for
// ScheduleRetention after its due time, and then forgotten by the next
// forwarder's prune.
func TestSettledPruned(t *testing.T) {
	e, topic, r := newTopicEnv(t, "pruned")
	cfg := e.forwarderConfig()
	cfg.ScheduleRetention = time.Hour
	ids := e.schedule(topic, scheduled("old", "k", time.Now().Add(-2*time.Hour)), scheduled("new", "k", time.Now()))
	f := e.startForwarder(cfg)
	r.next(2)
	ctx := kototest.Context(t)
	for _, id := range ids {
		if err := e.o.AutoTxPublisher().Cancel(ctx, id); !errors.Is(err, outbox.ErrSent) {
			t.Fatalf("Cancel(%s) before a prune: %v, want ErrSent", id, err)
		}
	}
	f.stop(t)
	e.startForwarder(cfg) // prunes at once
	settled := "SELECT count(*) FROM " + e.schema + ".outbox_settled"
	kototest.WaitFor(t, "the prune", func() bool { return pgtest.QueryInt(t, e.pool, settled) == 1 })
	if err := e.o.AutoTxPublisher().Cancel(ctx, ids[0]); !errors.Is(err, outbox.ErrUnknownSchedule) {
		t.Errorf("Cancel of the pruned one: %v, want ErrUnknownSchedule", err)
	}
	if err := e.o.AutoTxPublisher().Cancel(ctx, ids[1]); !errors.Is(err, outbox.ErrSent) {
		t.Errorf("Cancel of the kept one: %v, want ErrSent", err)
	}
}
