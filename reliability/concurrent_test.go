package reliability

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// concurrency is the Config.Concurrency of the concurrent scenarios.
const concurrency = 64

// keySeq is a message's place in an ordered stream: its key, and how many
// messages of that key come before it.
type keySeq struct {
	key string
	seq int
}

// burst is how many messages of a key come one after the other in
// [orderedMessages], as an aggregate's events do: together on their
// partition, where only their key's order keeps them apart.
const burst = 5

// orderedMessages returns total messages over keys partition keys, in
// bursts of [burst] messages of a key, and the place of each by UUID.
func orderedMessages(prefix string, keys, total int) ([]*message.Message, map[string]keySeq) {
	msgs := make([]*message.Message, total)
	places := make(map[string]keySeq, total)
	seqs := map[string]int{}
	for i := range msgs {
		key := prefix + "-" + strconv.Itoa(i/burst%keys)
		place := keySeq{key: key, seq: seqs[key]}
		seqs[key]++
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(place.key+"/"+strconv.Itoa(place.seq)))
		msgs[i].Metadata.Set(koto.PartitionKeyMetadataKey, place.key)
		places[msgs[i].UUID] = place
	}
	return msgs, places
}

// keyOrder reads the ledger in schema in the order its rows were written
// and counts the rows of a key that come before an earlier message of the
// key, or repeat one: out of order. It logs the first few.
func (r *ledgerRun) keyOrder(schema string, places map[string]keySeq) (outOfOrder int) {
	r.t.Helper()
	rows, err := r.pool.Query(context.Background(), "SELECT message_uuid FROM "+schema+"."+ledgerTable+" ORDER BY id")
	if err != nil {
		r.t.Fatalf("read the ledger: %v", err)
	}
	defer rows.Close()
	next := map[string]int{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			r.t.Fatal(err)
		}
		p := places[id]
		if p.seq < next[p.key] {
			if outOfOrder++; outOfOrder <= 5 {
				r.t.Errorf("key %s: message %d written after message %d", p.key, p.seq, next[p.key]-1)
			}
			continue
		}
		next[p.key] = p.seq + 1
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
	return outOfOrder
}

// TestConcurrentKeyOrder: one transactional consumer with Concurrency 64
// on 8 partitions, 20 000 messages (by default: 4 000) of 500 keys, each key's
// in bursts of 5; handlers wait 0–2 ms, 2 % of the messages fail their
// first delivery before the chain (nacked, delivered again) and 2 % their
// first attempt after writing their row (rolled back, tried again). The
// ledger holds every message exactly once, each key's in offset order.
func TestConcurrentKeyOrder(t *testing.T) {
	r := newLedgerRun(t, 8)
	total := fullOrShort(20000, 4000)
	msgs, places := orderedMessages("order", 500, total)
	cfg := r.consumer(t, "order", true, "")
	cfg.Concurrency, cfg.Chaos = concurrency, true
	pcfg := pgtest.Config(t)
	pcfg.MaxConns = 16
	runConsumer(t, pgtest.PoolWith(t, pcfg), cfg, nil, nil, kototest.Logger(slog.LevelError+4)) // not the router's line for each chaos failure
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = kototest.Record(r.topic, m.UUID, m.Metadata.Get(koto.PartitionKeyMetadataKey), m.Payload)
	}
	start := time.Now()
	kototest.Produce(t, r.brokers, recs)
	r.waitConsumed(cfg, total, 2*time.Minute)
	elapsed := time.Since(start)

	rows, distinct := r.ledger()
	outOfOrder := r.keyOrder(r.schema, places)
	if distinct != total || rows != distinct {
		t.Errorf("ledger has %d rows for %d of %d messages, want each exactly once", rows, distinct, total)
	}
	if n := r.deadLetters(cfg); n != 0 {
		t.Errorf("%d messages dead-lettered", n)
	}
	record(t, row{
		Checks:     "each key's messages in offset order; ledger exactly once (transactional)",
		Faults:     "handlers wait 0–2 ms; 2 % nacked on first delivery, 2 % rolled back after writing on first attempt",
		Messages:   total,
		Duplicates: rows - distinct,
		Losses:     total - distinct,
		Note:       fmt.Sprintf("Concurrency %d, 8 partitions, 500 keys; %d rows out of key order; %s", concurrency, outOfOrder, msgRate(total, elapsed)),
	})
}

// TestKillConcurrentTransactional: TestKillTransactional with consumers of
// Concurrency 64: many deliveries in flight at each kill, the ledger still
// exactly once and one event UUID per message on Kafka.
func TestKillConcurrentTransactional(t *testing.T) {
	r := newLedgerRun(t, 4)
	events := kototest.Topic(t, "events")
	seen := r.watchEvents(events)
	r.forward(r.pool, kototest.Logger(slog.LevelWarn))
	c := crashRun(t, true, events, concurrency, r)
	if c.rows != c.distinct {
		t.Errorf("ledger has %d rows for %d messages: %d duplicate effects in the transactional mode", c.rows, c.distinct, c.rows-c.distinct)
	}
	eventRecords := seen.check(r, events, c.total)
	record(t, row{
		Checks:     "ledger exactly once; one event UUID per message on Kafka (outbox); Concurrency 64",
		Faults:     fmt.Sprintf("SIGKILL of a concurrent consumer subprocess ×%d", len(c.killedAt)),
		Messages:   c.total,
		Duplicates: c.rows - c.distinct,
		Losses:     c.total - c.distinct,
		Note: fmt.Sprintf("%d records incl. duplicates; killed at ledger %v; %d in flight at the kills; %d event records",
			c.records, c.killedAt, c.inFlight, eventRecords),
	})
}

// TestKillConcurrentCheckHandleMark: TestKillCheckHandleMark with
// consumers of Concurrency 64: nothing lost, and no more duplicate effects
// than deliveries in flight at the kills.
func TestKillConcurrentCheckHandleMark(t *testing.T) {
	r := newLedgerRun(t, 4)
	c := crashRun(t, false, "", concurrency, r)
	dups := c.rows - c.distinct
	if dups > c.inFlight {
		t.Errorf("%d duplicate effects, more than the %d deliveries in flight at the %d kills", dups, c.inFlight, len(c.killedAt))
	}
	record(t, row{
		Checks:     "nothing lost; duplicate effects ≤ deliveries in flight at the kills; Concurrency 64",
		Faults:     fmt.Sprintf("SIGKILL of a concurrent consumer subprocess ×%d", len(c.killedAt)),
		Messages:   c.total,
		Duplicates: dups,
		Losses:     c.total - c.distinct,
		Note:       fmt.Sprintf("%d records incl. duplicates; killed at ledger %v; bound: %d in flight at the kills", c.records, c.killedAt, c.inFlight),
	})
}

// TestRebalanceConcurrent: TestRebalance (3 → 4 → 3 consumers a group)
// with consumers of Concurrency 64 on a stream of 500 keys. Every message
// is handled, exactly once in the transactional mode, and each key's
// messages are written in offset order across the handovers: a partition's
// new owner starts where the old one's acks left off, never past a message
// the old one had not acked (see broker's
// TestRevokedPartitionIsNotAckedIntoTheNewOwner for the offsets themselves).
func TestRebalanceConcurrent(t *testing.T) {
	r := newLedgerRun(t, rebalancePartitions)
	total := fullOrShort(10000, 2000)
	msgs, places := orderedMessages("rebalance", 500, total)
	res := r.rebalance(t, msgs, concurrency)
	outOfOrder := r.keyOrder(res.groups[0].Schema, places)
	record(t, row{
		Checks:     "every message handled (both modes); transactional ledger exactly once and each key in offset order",
		Faults:     "3 consumers a group, a 4th joins with 1/3 out, one holding a delivery closes with 2/3 out; Concurrency 64",
		Messages:   total,
		Duplicates: res.duplicates,
		Losses:     res.losses,
		Note:       fmt.Sprintf("%d partitions, 500 keys; %s; %d transactional rows out of key order", rebalancePartitions, res.note, outOfOrder),
	})
}
