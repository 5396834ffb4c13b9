package reliability

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/internal/kafkatest"
)

// kills is how many times the crash scenarios kill a consumer while
// messages remain to be handled.
const kills = 6

// busy returns the index of a random one of procs with deliveries in
// flight, or -1.
func busy(procs []*process) int {
	for _, i := range rand.Perm(len(procs)) {
		if procs[i].inFlightNow() > 0 {
			return i
		}
	}
	return -1
}

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
// Config.Concurrency concurrency, on a stream of
// distinct messages, a fifth of them re-published; kills times, at random
// moments while the ledger is incomplete, it kills one that has deliveries
// in flight with SIGKILL and starts a new one; then it waits until the
// group has consumed everything.
func crashRun(t *testing.T, transactional bool, events string, concurrency int, r *ledgerRun) *crash {
	t.Helper()
	c := &crash{total: fullOrShort(5000, 1000)} // distinct messages; a fifth come again
	c.cfg = r.consumer(t, "crash", transactional, events)
	c.cfg.Concurrency = concurrency
	procs := []*process{spawn(t, c.cfg), spawn(t, c.cfg)}
	msgs := withRepublished(keyedMessages("crash", c.total))
	c.records = len(msgs)
	pub := r.publish(msgs, 3*time.Second)

	// Each kill waits for the ledger to grow by a random share of the
	// stream since the last, and for a random moment more, then kills a consumer with
	// deliveries in flight: one that is busy, not one still joining.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	step := c.total / (2 * (kills + 2))
	last := 0 // the ledger at the last kill
	for k := range kills {
		next := last + step + rand.N(step)
		var victim int
		for {
			_, distinct := r.ledger()
			if distinct >= c.total {
				t.Fatalf("the consumers handled all %d messages before kill %d", c.total, k+1)
			}
			if distinct >= next {
				if victim = busy(procs); victim >= 0 {
					break
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("kill %d: the ledger stayed at %d messages, short of %d, or no consumer was busy", k+1, distinct, next)
			case <-time.After(time.Duration(rand.N(40)) * time.Millisecond):
			}
		}
		_, distinct := r.ledger()
		n := procs[victim].kill(t)
		c.inFlight += n
		c.killedAt, last = append(c.killedAt, distinct), distinct
		t.Logf("kill %d: consumer %d with the ledger at %d, %d deliveries in flight", k+1, victim, distinct, n)
		procs[victim] = spawn(t, c.cfg)
	}
	if !pub.over(t) {
		<-pub.finished
		pub.over(t)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, p := range procs {
				t.Logf("consumer %d's log:\n%s", i, p.stderr.String())
			}
		}
	})
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

// TestKillTransactional (scenario 1): two consumers in the transactional
// mode, each a subprocess (this test binary, run again), share a group
// and handle 5 000 messages (-short: 1 000) plus a re-publication (same
// UUID) of a fifth of them; a consumer with deliveries in flight is killed
// with SIGKILL at random moments, [kills] times while messages remain, and
// replaced. Each writes a ledger row
// and publishes an event through the outbox in the transaction of its
// claim; a forwarder in the test's process sends the events to Kafka.
// The ledger holds each message exactly once, and Kafka exactly one event
// UUID per message: a kill rolls back the claim, the row and the event
// together, and the redelivery finds either all of them or none.
func TestKillTransactional(t *testing.T) {
	r := newLedgerRun(t, 4)
	events := kafkatest.Topic(t, "events")
	seen := r.watchEvents(events)
	r.forward(r.pool, kafkatest.Logger(slog.LevelWarn))
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
// runs the handler again on redelivery, so the ledger may hold duplicates,
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
