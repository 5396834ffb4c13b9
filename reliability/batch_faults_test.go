package reliability

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// TestBatchPostgresOutage: a cqrs batch consumer of a DurableOutbox's
// Service, reaching PostgreSQL through a TCP proxy, writes a ledger row
// and publishes an event through the outbox for each message, in batches
// of up to 500; 10 000 messages (by default: 4 000) of 500 keys, 2 % of them
// re-published. The first half of the stream is published; once the
// consumer reaches a message of it chosen at random, its batch is held
// with its rows written, PostgreSQL is cut, the batch let go (its commit
// fails), the second half published, and PostgreSQL restored 5 s later.
// Every batch and the forwarder retry the outage in place: nothing is
// dead-lettered, the ledger holds each message exactly once, each key's
// in offset order, and Kafka one event per message.
// batchOutageLength is how long the batch scenario's cut of PostgreSQL
// lasts: the length of the fault itself, not a wait for a state.
const batchOutageLength = 5 * time.Second

func TestBatchPostgresOutage(t *testing.T) {
	r := newBatchRun(t, 8)
	total := fullOrShort(10000, 4000)
	msgs, places := batchMessages("outage", 500, total)
	stream := withBatchCopies(msgs)
	half := len(stream) / 2
	events := kototest.Topic(t, "events")
	seen := r.watchEvents(events)
	pool, proxy := pgtest.ProxiedPool(t)
	defer proxy.Restore() // should the test fail during the cut

	spec, cfg := r.batchConsumer(t, "batch-outage")
	spec.CQRS, spec.Events = true, events
	spec.Holds = holdMarks(stream, []int{0, half}, rand.N)
	holds := newBatchHolds(spec.Holds, 0)
	var dups kototest.Counter
	logs := &kototest.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	runBatchConsumer(t, pool, spec, batchHooks{holds: holds, dup: func(id string) { dups.Add(id) }}, logger)
	retries := func() int { return strings.Count(logs.String(), `"msg":"batch failed, retrying"`) }
	forwarderRetries := func() int { return strings.Count(logs.String(), "outbox forwarder failed; retrying") }

	r.produce(stream[:half])
	kototest.WaitFor(t, "a batch held by hold 0", func() bool { return holds.isHeld(0) })
	_, atCut := r.ledger()
	proxy.Cut()
	holds.openTo(1) // its commit meets the cut
	r.produce(stream[half:])
	time.Sleep(batchOutageLength)
	cutRetries, cutForwarder := retries(), forwarderRetries()
	proxy.Restore()
	r.waitConsumed(cfg, len(stream), 3*time.Minute)

	duplicates, losses, outOfOrder := r.checkLedger(t, total, places, dups.Total())
	if n := r.deadLetters(cfg); n != 0 {
		t.Errorf("%d messages dead-lettered during the outage", n)
	}
	if cutRetries == 0 {
		t.Errorf("no batch failed as an outage in the %v cut", batchOutageLength)
	}
	if cutForwarder == 0 {
		t.Errorf("the forwarder retried nothing in the %v cut", batchOutageLength)
	}
	eventRecords := seen.check(r, events, total)
	record(t, row{
		Checks:     "no dead letter; ledger exactly once, each key in offset order; one event per message on Kafka (outbox)",
		Faults:     fmt.Sprintf("PostgreSQL cut (TCP proxy) %v, with a batch's rows written and its commit to come; 2 %% re-published", batchOutageLength),
		Messages:   total,
		Duplicates: duplicates,
		Losses:     losses,
		Note: fmt.Sprintf("cqrs batch consumer, 8 partitions, 500 keys; %d records; cut with the ledger at %d; %d batch attempts and %d forwarder rounds retried as outages; %d rows out of key order; %d event records",
			len(stream), atCut, cutRetries, cutForwarder, outOfOrder, eventRecords),
	})
}

// TestBatchRebalance: 10 000 messages (by default: 4 000) of 1 000 keys on 8
// partitions through three in-process router handlers of
// middleware.BatchDefaults in one group, at full speed: two thirds of the
// stream are published at once. Once one of them reaches a message of
// the first third chosen at random, it holds that batch (rows written,
// not committed) while a fourth joins the group; then the last third is
// published, and once one reaches a message of it chosen at random, it
// holds that batch while the first consumer leaves. Each held batch is let go once
// the group has its new members: the messages of partitions that moved
// meanwhile are rolled back and handed to their new owner, whose claims
// waited for the held transaction. The ledger holds each message exactly
// once, each key's in offset order.
func TestBatchRebalance(t *testing.T) {
	r := newBatchRun(t, rebalancePartitions)
	total := fullOrShort(10000, 4000)
	msgs, places := batchMessages("rebalance", 1000, total)
	spec, cfg := r.batchConsumer(t, "batch-rebalance")
	bounds := partBounds(total, 3)
	marks := holdMarks(msgs, bounds, rand.N)
	spec.Holds = []string{marks[0], marks[2]}
	holds := newBatchHolds(spec.Holds, 0)
	var dups kototest.Counter
	stats := &batchStats{}
	hooks := batchHooks{holds: holds, dup: func(id string) { dups.Add(id) }, wrap: stats.wrap}
	pool, logger := batchPool(t), kototest.Logger(slog.LevelWarn)
	var stops []func()
	for range 3 {
		stops = append(stops, runBatchConsumer(t, pool, spec, hooks, logger))
	}
	r.produce(msgs[:bounds[2]])

	kototest.WaitFor(t, "a batch held by hold 0", func() bool { return holds.isHeld(0) })
	_, atJoin := r.ledger()
	stops = append(stops, runBatchConsumer(t, pool, spec, hooks, logger))
	r.waitMembers(cfg.Group, 4)
	holds.openTo(1)
	r.produce(msgs[bounds[2]:])
	kototest.WaitFor(t, "a batch held by hold 1", func() bool { return holds.isHeld(1) })
	_, atLeave := r.ledger()
	left := make(chan struct{})
	go func() { // it may be the one holding the batch
		defer close(left)
		stops[0]()
	}()
	r.waitMembers(cfg.Group, 3)
	holds.openTo(2)
	<-left
	r.waitConsumed(cfg, total, 3*time.Minute)

	duplicates, losses, outOfOrder := r.checkLedger(t, total, places, dups.Total())
	if n := r.deadLetters(cfg); n != 0 {
		t.Errorf("%d messages dead-lettered", n)
	}
	record(t, row{
		Checks:     "ledger exactly once, each key in offset order; no duplicate reaches the handler",
		Faults:     "3 batch consumers a group at full speed; a 4th joins, then the 1st leaves, each while a batch is held (rows written, not committed)",
		Messages:   total,
		Duplicates: duplicates,
		Losses:     losses,
		Note: fmt.Sprintf("router handlers of BatchDefaults, %d partitions, 1000 keys; joined with the ledger at %d, left at %d; %d rows out of key order; %s",
			rebalancePartitions, atJoin, atLeave, outOfOrder, stats),
	})
}
