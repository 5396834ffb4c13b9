package reliability

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/kototest"
)

// kills is how many times the crash scenarios kill a consumer while
// messages remain to be handled.
const kills = 6

// crash is the outcome of a crash run.
type crash struct {
	cfg         consumerConfig
	total       int
	records     int
	inFlight    int // deliveries in flight in the killed processes, summed over the kills
	rows        int
	distinct    int
	killedAt    []int // ledger messages at each kill
	deadLetters int64
}

// crashRun runs two consumer subprocesses of one group, each with
// Config.Concurrency concurrency, on a stream of distinct messages, a
// fifth of them re-published, in kills+1 parts. Part k goes out once kill
// k-1 is over; one of its messages, chosen at random, is held by its
// handler (see holds), after its effect for kills 1, 3 and 5 and before it
// for the others. Kill k waits until a consumer holds that message, kills
// it with SIGKILL, and starts a new one: each kill lands mid-stream, with
// a delivery in flight, its effect written and not acked or not written
// yet, and parts still to come. Then it waits until the group has
// consumed everything.
func crashRun(t *testing.T, transactional bool, events string, concurrency int, r *ledgerRun) *crash {
	t.Helper()
	c := &crash{total: fullOrShort(5000, 1000)} // distinct messages; a fifth come again
	c.cfg = r.consumer(t, "crash", transactional, events)
	c.cfg.Concurrency = concurrency
	procs := []*process{spawn(t, c.cfg), spawn(t, c.cfg)}
	t.Cleanup(func() {
		if t.Failed() {
			for i, p := range procs {
				t.Logf("consumer %d's log:\n%s", i, p.stderr.String())
			}
		}
	})
	msgs := withRepublished(keyedMessages("crash", c.total))
	c.records = len(msgs)
	parts := streamParts(len(msgs), kills+1)
	held := markHolds(msgs, parts, kills)
	for k, i := range held {
		if k%2 == 1 {
			msgs[i].Metadata.Set(holdAtKey, string(beforeEffect))
		}
	}
	stream := r.feed(msgs)
	for k := range kills {
		stream.to(parts[k+1])
		victim := holder(t, procs, k, msgs[held[k]].UUID)
		_, distinct := r.ledger()
		n := procs[victim].kill(t)
		c.inFlight += n
		c.killedAt = append(c.killedAt, distinct)
		t.Logf("kill %d: consumer %d with the ledger at %d, %d deliveries in flight", k+1, victim, distinct, n)
		c.cfg.Open = k + 1
		for i, p := range procs {
			if i != victim {
				p.open(t, c.cfg.Open)
			}
		}
		procs[victim] = spawn(t, c.cfg)
	}
	stream.to(len(msgs))
	r.waitConsumed(c.cfg, c.records, 45*time.Second)
	for _, p := range procs {
		p.stop(t)
	}
	c.rows, c.distinct = r.ledger()
	c.deadLetters = r.deadLetters(c.cfg)
	if c.distinct != c.total {
		t.Errorf("ledger holds %d of %d messages", c.distinct, c.total)
	}
	if c.deadLetters != 0 {
		t.Errorf("%d messages dead-lettered", c.deadLetters)
	}
	return c
}

// holder waits until one of procs holds a delivery of message uuid, hold
// k, and returns its index.
func holder(t *testing.T, procs []*process, k int, uuid string) int {
	t.Helper()
	victim := -1
	kototest.WaitFor(t, fmt.Sprintf("a consumer to hold message %s (hold %d)", uuid, k), func() bool {
		for i, p := range procs {
			held, exited := p.holding(k)
			if exited {
				t.Fatalf("consumer %d exited on its own: %s", i, p.stderr.String())
			}
			if held {
				victim = i
				return true
			}
		}
		return false
	})
	return victim
}

// TestKillTransactional (scenario 1): two consumers in the transactional
// mode, each a subprocess (this test binary, run again), share a group
// and handle 5 000 messages (by default: 1 000) plus a re-publication (same
// UUID) of a fifth of them; [kills] times while messages remain, a
// consumer holding a delivery (a message chosen at random, its effect
// written or not yet) is killed with SIGKILL and replaced (see crashRun).
// Each writes a ledger row
// and publishes an event through the outbox in the transaction of its
// claim; a forwarder in the test's process sends the events to Kafka.
// The ledger holds each message exactly once, and Kafka exactly one event
// UUID per message: a kill rolls back the claim, the row and the event
// together, and the redelivery finds either all of them or none.
func TestKillTransactional(t *testing.T) {
	r := newLedgerRun(t, 4)
	events := kototest.Topic(t, "events")
	seen := r.watchEvents(events)
	r.forward(r.pool, kototest.Logger(slog.LevelWarn))
	c := crashRun(t, true, events, 0, r)
	if c.rows != c.distinct {
		t.Errorf("ledger has %d rows for %d messages: %d duplicate effects in the transactional mode", c.rows, c.distinct, c.rows-c.distinct)
	}
	eventRecords := seen.check(r, events, c.total)
	record(t, row{
		Checks:     "ledger exactly once; one event UUID per message on Kafka (outbox)",
		Faults:     fmt.Sprintf("SIGKILL of a consumer subprocess ×%d", len(c.killedAt)),
		Messages:   c.total,
		Duplicates: c.rows - c.distinct,
		Losses:     c.total - c.distinct,
		Note: fmt.Sprintf("%d records incl. duplicates; killed at ledger %v; %d in flight at the kills; %d event records",
			c.records, c.killedAt, c.inFlight, eventRecords),
	})
}

// TestKillCheckHandleMark (scenario 2): as TestKillTransactional, in the
// check-handle-mark mode: the handler writes its ledger row on its own,
// and the message is marked in the store after. A kill between the two
// (kills 1, 3 and 5 are, for the message held) runs the handler again on redelivery, so the ledger may hold duplicates,
// but at most the deliveries in flight (begun and not ended: each
// subprocess writes a line as a delivery enters and leaves the chain) in
// the processes killed, summed over the kills. Nothing is lost.
func TestKillCheckHandleMark(t *testing.T) {
	r := newLedgerRun(t, 4)
	c := crashRun(t, false, "", 0, r)
	dups := c.rows - c.distinct
	if dups > c.inFlight {
		t.Errorf("%d duplicate effects, more than the %d deliveries in flight at the %d kills", dups, c.inFlight, len(c.killedAt))
	}
	record(t, row{
		Checks:     "nothing lost; duplicate effects ≤ deliveries in flight at the kills",
		Faults:     fmt.Sprintf("SIGKILL of a consumer subprocess ×%d", len(c.killedAt)),
		Messages:   c.total,
		Duplicates: dups,
		Losses:     c.total - c.distinct,
		Note:       fmt.Sprintf("%d records incl. duplicates; killed at ledger %v; bound: %d in flight at the kills", c.records, c.killedAt, c.inFlight),
	})
}
