package reliability

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// newBatchRun is newLedgerRun with an index on the ledger's message
// UUIDs, which the batch handlers look up.
func newBatchRun(t *testing.T, partitions int) *ledgerRun {
	t.Helper()
	r := newLedgerRun(t, partitions)
	pgtest.Exec(t, r.pool, "CREATE INDEX ON "+r.schema+"."+ledgerTable+" (message_uuid)")
	return r
}

// batchConsumer returns the spec of a batch consumer of a new group on
// the scenario's topic, and the consumerConfig that the ledgerRun's
// checks take.
func (r *ledgerRun) batchConsumer(t *testing.T, prefix string) (batchSpec, consumerConfig) {
	t.Helper()
	cfg := r.consumer(t, prefix, true, "")
	return batchSpec{Brokers: cfg.Brokers, Schema: cfg.Schema, Topic: cfg.Topic, Group: cfg.Group}, cfg
}

// produce writes msgs to the scenario's topic, keyed by their partition
// key, and returns once the broker has them.
func (r *ledgerRun) produce(msgs []*message.Message) {
	r.t.Helper()
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = kototest.Record(r.topic, m.UUID, m.Metadata.Get(koto.PartitionKeyMetadataKey), m.Payload)
	}
	kototest.Produce(r.t, r.brokers, recs)
}

// withBatchCopies returns msgs with a re-publication (same UUID) of 2 %
// of them, each later on its partition than its original.
func withBatchCopies(msgs []*message.Message) []*message.Message {
	return kototest.WithDuplicates(msgs, func(i int) bool { return i%50 == 7 })
}

// runBatchConsumer runs the consumer of spec on pool in the test's
// process and returns a function that stops it; the test's cleanup calls
// it too, after opening every hold.
func runBatchConsumer(t *testing.T, pool *pgxpool.Pool, spec batchSpec, hooks batchHooks, logger *slog.Logger) (stop func()) {
	t.Helper()
	c, err := startBatchConsumer(pool, spec, hooks, logger)
	if err != nil {
		t.Fatalf("start batch consumer: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := c.stop(); err != nil {
				t.Errorf("stop batch consumer: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	if hooks.holds != nil {
		t.Cleanup(func() { hooks.holds.openTo(math.MaxInt) }) // before stop
	}
	return stop
}

// batchPool returns a pool for in-process batch consumers: a connection
// for each batch running, and some to spare.
func batchPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pcfg := pgtest.Config(t)
	pcfg.MaxConns = 12
	return pgtest.PoolWith(t, pcfg)
}

// batchStats counts the calls of a batch handler and the messages they
// got.
type batchStats struct {
	mu       sync.Mutex
	calls    int
	messages int
	largest  int
	seen     kototest.Counter // handler sightings by UUID, rolled-back attempts included
}

func (s *batchStats) wrap(h middleware.BatchHandlerFunc) middleware.BatchHandlerFunc {
	return func(ctx context.Context, msgs []*message.Message) error {
		s.mu.Lock()
		s.calls++
		s.messages += len(msgs)
		s.largest = max(s.largest, len(msgs))
		s.mu.Unlock()
		for _, m := range msgs {
			s.seen.Add(m.UUID)
		}
		return h(ctx, msgs)
	}
}

// String sums the batches up for a scenario's note.
func (s *batchStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d handler calls, %.0f messages a call on average, %d at most", s.calls, float64(s.messages)/float64(max(1, s.calls)), s.largest)
}

// checkLedger fails t unless the ledger holds each of want messages
// exactly once, no other, and each key's in offset order, and no
// duplicate (of dups that the handlers saw) reached a handler; it returns
// the duplicate effects, the losses and the rows out of order.
func (r *ledgerRun) checkLedger(t *testing.T, want int, places map[string]keySeq, dups int) (duplicates, losses, outOfOrder int) {
	t.Helper()
	rows, distinct := r.ledger()
	if rows != want || distinct != want {
		t.Errorf("ledger has %d rows of %d messages, want %d, each once", rows, distinct, want)
	}
	if dups != 0 {
		t.Errorf("%d duplicates reached the handler", dups)
	}
	return rows - distinct, max(0, want-distinct), r.keyOrder(r.schema, places)
}

// TestBatchLedger: 50 000 messages (by default: 10 000) of 1 000 keys on 8
// partitions, 2 % of them re-published with the same UUID, through a
// router handler of middleware.BatchDefaults in the transactional mode
// with batches of up to 500: each batch writes a ledger row per message in
// its transaction, after looking the messages up in the ledger. The
// ledger holds every message exactly once, each key's in offset order, no
// message the ledger held already (a duplicate) reached the handler, and
// nothing is dead-lettered.
func TestBatchLedger(t *testing.T) {
	r := newBatchRun(t, 8)
	total := fullOrShort(50000, 10000)
	msgs, places := batchMessages("ledger", 1000, total)
	stream := withBatchCopies(msgs)
	spec, cfg := r.batchConsumer(t, "batch-ledger")
	var dups kototest.Counter
	stats := &batchStats{}
	runBatchConsumer(t, batchPool(t), spec, batchHooks{dup: func(id string) { dups.Add(id) }, wrap: stats.wrap}, kototest.Logger(slog.LevelWarn))
	start := time.Now()
	r.produce(stream)
	r.waitConsumed(cfg, len(stream), 3*time.Minute)
	elapsed := time.Since(start)

	duplicates, losses, outOfOrder := r.checkLedger(t, total, places, dups.Total())
	if n := r.deadLetters(cfg); n != 0 {
		t.Errorf("%d messages dead-lettered", n)
	}
	record(t, row{
		Checks:     "ledger exactly once, written in the batch transactions; each key in offset order; no duplicate reaches the handler",
		Faults:     "2 % re-published with the same UUID",
		Messages:   total,
		Duplicates: duplicates,
		Losses:     losses,
		Note: fmt.Sprintf("router handler of BatchDefaults, batches up to %d; 8 partitions, 1000 keys; %d records; %d rows out of key order; %s; %s",
			batchMax, len(stream), outOfOrder, stats, msgRate(len(stream), elapsed)),
	})
}

// batchKills is how many times TestKillBatchConsumer kills a consumer.
const batchKills = 5

// TestKillBatchConsumer: TestBatchLedger's stream through two
// subprocesses of one group, each a cqrs batch consumer
// (NewBatchEventConsumer) of a DurableOutbox's Service, writing its ledger
// rows and an event per message through the outbox in the batch's
// transaction; each runs the DurableOutbox's forwarder too. The stream is
// published in six parts; in each of the first five a message chosen at
// random holds its batch, rows and events written and transaction open,
// and the consumer holding it is killed with SIGKILL and replaced, before
// the next part is published. The ledger holds every message exactly
// once, each key's in offset order, no duplicate reached a handler, and
// Kafka has exactly one event UUID per message: a kill rolls back the
// batch's claims, rows and events together, and the redelivery finds
// either all of them or none.
func TestKillBatchConsumer(t *testing.T) {
	r := newBatchRun(t, 8)
	total := fullOrShort(50000, 10000)
	msgs, places := batchMessages("kill", 1000, total)
	stream := withBatchCopies(msgs)
	bounds := partBounds(len(stream), batchKills+1)
	events := kototest.Topic(t, "events")
	seen := r.watchEvents(events)
	spec, cfg := r.batchConsumer(t, "batch-kill")
	spec.CQRS, spec.Events = true, events
	spec.Holds = holdMarks(stream, bounds[:batchKills+1], rand.N)
	procs := []*process{spawnRole(t, roleBatchConsumer, spec), spawnRole(t, roleBatchConsumer, spec)}
	all := append([]*process(nil), procs...)
	t.Cleanup(func() {
		if t.Failed() {
			for i, p := range all {
				t.Logf("consumer %d's log:\n%s", i, p.stderr.String())
			}
		}
	})
	var killedAt, held []int
	for k := range batchKills {
		r.produce(stream[bounds[k]:bounds[k+1]])
		victim, size := waitBatchHold(t, procs, k)
		if k > 0 { // the other batches of the part go on: the kill lands later in the stream than the last
			kototest.WaitFor(t, "the ledger to grow past the last kill", func() bool { _, d := r.ledger(); return d > killedAt[k-1] })
		}
		_, distinct := r.ledger()
		procs[victim].kill(t)
		killedAt, held = append(killedAt, distinct), append(held, size)
		t.Logf("kill %d: consumer %d holding a batch of %d, the ledger at %d of %d messages", k+1, victim, size, distinct, total)
		spec.Open = k + 1
		for i, p := range procs {
			if i != victim { // it may hold the same message, redelivered
				openBatchHolds(t, p, k+1)
			}
		}
		procs[victim] = spawnRole(t, roleBatchConsumer, spec)
		all = append(all, procs[victim])
	}
	r.produce(stream[bounds[batchKills]:])
	r.waitConsumed(cfg, len(stream), 3*time.Minute)
	var dups []string
	for _, p := range all {
		dups = append(dups, batchDups(p)...)
	}
	duplicates, losses, outOfOrder := r.checkLedger(t, total, places, len(dups))
	eventRecords := seen.check(r, events, total) // while the forwarders run
	for _, p := range procs {
		p.stop(t)
	}
	if n := r.deadLetters(cfg); n != 0 {
		t.Errorf("%d messages dead-lettered", n)
	}
	for i := 1; i < len(killedAt); i++ {
		if killedAt[i] <= killedAt[i-1] {
			t.Errorf("the ledger did not grow between kills %d and %d: %v", i, i+1, killedAt)
		}
	}
	record(t, row{
		Checks:     "ledger exactly once, written in the batch transactions; each key in offset order; no duplicate reaches the handler; one event UUID per message on Kafka (outbox)",
		Faults:     fmt.Sprintf("SIGKILL ×%d of a cqrs batch consumer subprocess holding a batch (rows and events written, not committed); 2 %% re-published", len(killedAt)),
		Messages:   total,
		Duplicates: duplicates,
		Losses:     losses,
		Note: fmt.Sprintf("2 consumers, batches up to %d; 8 partitions, 1000 keys; %d records; killed at ledger %v, holding batches of %v; %d rows out of key order; %d event records",
			batchMax, len(stream), killedAt, held, outOfOrder, eventRecords),
	})
}

// waitBatchHold waits until one of the batch consumers procs holds a
// batch by hold k, and returns its index and the batch's size. It fails t
// if one exits.
func waitBatchHold(t *testing.T, procs []*process, k int) (int, int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		for i, p := range procs {
			select {
			case <-p.read:
				t.Fatalf("consumer %d exited: %s", i, p.stderr.String())
			default:
			}
			if size, ok := heldBatch(p, k); ok {
				return i, size
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no consumer held a batch by hold %d within 2m", k)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBatchHotKey: 20 000 messages (by default: 5 000) of one key through a
// router handler of middleware.BatchDefaults: the batch subscriber hands
// out the key's messages read while none of it is in flight together, so
// they fill batches of up to 500, one batch of the key at a time. The ledger holds each message exactly once, in
// offset order, and the batches hold many messages.
func TestBatchHotKey(t *testing.T) {
	r := newBatchRun(t, 8)
	total := fullOrShort(20000, 5000)
	msgs, places := batchMessages("hot", 1, total)
	spec, cfg := r.batchConsumer(t, "batch-hot")
	var dups kototest.Counter
	stats := &batchStats{}
	runBatchConsumer(t, batchPool(t), spec, batchHooks{dup: func(id string) { dups.Add(id) }, wrap: stats.wrap}, kototest.Logger(slog.LevelWarn))
	start := time.Now()
	r.produce(msgs)
	r.waitConsumed(cfg, total, 3*time.Minute)
	elapsed := time.Since(start)

	duplicates, losses, outOfOrder := r.checkLedger(t, total, places, dups.Total())
	if n := r.deadLetters(cfg); n != 0 {
		t.Errorf("%d messages dead-lettered", n)
	}
	stats.mu.Lock()
	if stats.largest < 100 {
		t.Errorf("the largest batch of the hot key had %d messages, want batches of many", stats.largest)
	}
	stats.mu.Unlock()
	record(t, row{
		Checks:     "one key's messages exactly once, in offset order, in batches of many",
		Faults:     "every message of one key",
		Messages:   total,
		Duplicates: duplicates,
		Losses:     losses,
		Note:       fmt.Sprintf("router handler of BatchDefaults, batches up to %d; %d rows out of order; %s; %s", batchMax, outOfOrder, stats, msgRate(total, elapsed)),
	})
}
