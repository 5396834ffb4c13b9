package outbox_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/kototest"
)

// collector reads a topic in the background and keeps every record by
// payload.
type collector struct {
	mu   sync.Mutex
	recs map[string][]record
}

// collect reads r until the test ends.
func collect(t *testing.T, r *reader) *collector {
	c := &collector{recs: map[string][]record{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			r.cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
				c.mu.Lock()
				defer c.mu.Unlock()
				c.recs[string(rec.Value)] = append(c.recs[string(rec.Value)], toRecord(rec))
			})
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// distinct returns how many distinct payloads arrived.
func (c *collector) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

// TestScheduledSurviveForwarderKills: 10 000 messages (2 000 under -short)
// are scheduled over the next 30 seconds (6), and two forwarders run in
// subprocesses; three times, once a further quarter of the messages has
// arrived, the active one is killed with SIGKILL and a new one started.
// Every message arrives, none before its time; a message arrives twice
// only as a batch the killed forwarder had produced without recording it,
// with its UUID, so at most three batches come twice.
func TestScheduledSurviveForwarderKills(t *testing.T) {
	n, spread := 10_000, 30*time.Second
	if testing.Short() {
		n, spread = 2_000, 6*time.Second
	}
	const batch, kills = 200, 3
	e := newEnv(t)
	topic := kototest.Topic(t, "scheduled-kills")
	c := collect(t, newReader(t, e.brokers, topic))
	start := time.Now()
	for from := 0; from < n; from += 500 {
		msgs := make([]*message.Message, 0, 500)
		for i := from; i < min(from+500, n); i++ {
			at := start.Add(rand.N(spread))
			msgs = append(msgs, scheduled(strconv.Itoa(i), "k"+strconv.Itoa(i%16), at))
		}
		e.schedule(topic, msgs...)
	}
	procs := map[string]*forwarderProcess{}
	spawn := func() {
		app := "koto-test-fwd-" + strconv.Itoa(len(procs))
		procs[app] = e.spawnForwarder(app, batch)
	}
	spawn()
	spawn()
	for k := 1; k <= kills; k++ {
		kototest.WaitFor(t, "a quarter more of the messages", func() bool { return c.distinct() >= k*n/(kills+1) })
		var active string
		kototest.WaitFor(t, "an active forwarder", func() bool {
			if f := e.status().Forwarder; f != nil {
				active = f.ApplicationName
			}
			return procs[active] != nil && !procs[active].dead
		})
		procs[active].kill(t)
		t.Logf("kill %d: %s, after %d messages", k, active, c.distinct())
		spawn()
	}
	kototest.WaitFor(t, "every message", func() bool { return c.distinct() == n })
	kototest.WaitFor(t, "the outbox and the schedule to empty", func() bool { return e.rows() == 0 && e.scheduledRows() == 0 })

	c.mu.Lock()
	defer c.mu.Unlock()
	dups := 0
	for payload, recs := range c.recs {
		notEarly(t, recs)
		for _, r := range recs[1:] {
			dups++
			if r.UUID != recs[0].UUID {
				t.Errorf("%s came again with UUID %s, first with %s", payload, r.UUID, recs[0].UUID)
			}
		}
	}
	t.Logf("%d messages, %d duplicates", n, dups)
	if dups > kills*batch {
		t.Errorf("%d duplicates, more than the %d batches of %d the kills can leave unrecorded", dups, kills, batch)
	}
}
