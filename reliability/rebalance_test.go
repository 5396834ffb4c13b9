package reliability

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/internal/kafkatest"
	"github.com/koto-dev/watermill-koto/internal/pgtest"
)

// rebalancePartitions is the partitions of TestRebalance's topic: enough
// for four consumers.
const rebalancePartitions = 8

// TestRebalance (scenario 5): two groups, one in the transactional mode
// and one in check-handle-mark (each with a ledger of its own), start with
// three consumers each on an 8-partition topic; while 10 000 messages
// flow, a fourth consumer joins each group once the ledgers hold a third
// of them, and the first consumer of each closes once they hold two
// thirds. Every message is handled, and exactly once in the transactional
// mode: a delivery of a partition that moved meets the claim of the
// delivery still running on the old owner.
func TestRebalance(t *testing.T) {
	r := newLedgerRun(t, rebalancePartitions)
	total := fullOrShort(10000, 2000) // distinct messages
	res := r.rebalance(t, keyedMessages("rebalance", total), 0)
	record(t, row{
		Checks:     "every message handled (both modes); transactional ledger exactly once",
		Faults:     "3 consumers a group, a 4th joins at 1/3, the 1st closes at 2/3",
		Messages:   total,
		Duplicates: res.duplicates,
		Losses:     res.losses,
		Note:       fmt.Sprintf("%d partitions; %s", rebalancePartitions, res.note),
	})
}

// rebalanced is the outcome of [ledgerRun.rebalance].
type rebalanced struct {
	groups             []consumerConfig
	duplicates, losses int
	note               string
}

// rebalance runs TestRebalance's scenario on msgs with consumers of the
// given Config.Concurrency, and checks that every message was handled, and
// exactly once in the transactional mode.
func (r *ledgerRun) rebalance(t *testing.T, msgs []*message.Message, concurrency int) rebalanced {
	total := len(msgs)
	logger := kafkatest.Logger(slog.LevelWarn)
	groups := []consumerConfig{r.consumer(t, "rebalance-tx", true, ""), r.consumer(t, "rebalance-chm", false, "")}
	groups[1].Schema = pgtest.Schema(t, r.pool)
	r.prepare(groups[1].Schema)
	pools := make([]*pgxpool.Pool, len(groups))
	stops := make([][]func(), len(groups))
	for g := range groups {
		groups[g].Concurrency = concurrency
		pcfg := pgtest.Config(t)
		pcfg.MaxConns = rebalancePartitions + 4 // a connection per partition, and some to spare
		pools[g] = pgtest.PoolWith(t, pcfg)
		for range 3 {
			stops[g] = append(stops[g], runConsumer(t, pools[g], groups[g], logger))
		}
	}
	pub := r.publish(msgs, 8*time.Second)

	r.waitLedgers(groups, total/3, time.Minute)
	for g, cfg := range groups {
		stops[g] = append(stops[g], runConsumer(t, pools[g], cfg, logger))
	}
	for _, cfg := range groups {
		r.waitMembers(cfg.Group, 4)
	}
	r.waitLedgers(groups, 2*total/3, time.Minute)
	for g, cfg := range groups {
		stops[g][0]()
		r.waitMembers(cfg.Group, 3)
	}
	for !pub.over(t) {
		<-pub.finished
	}
	res := rebalanced{groups: groups}
	var notes []string
	for _, cfg := range groups {
		r.waitConsumed(cfg, total, time.Minute)
		rows, distinct := r.ledgerIn(cfg.Schema)
		if distinct != total {
			t.Errorf("%s: ledger holds %d of %d messages", cfg.Group, distinct, total)
		}
		if cfg.Transactional && rows != distinct {
			t.Errorf("%s: ledger has %d rows for %d messages in the transactional mode", cfg.Group, rows, distinct)
		}
		if n := r.deadLetters(cfg); n != 0 {
			t.Errorf("%s: %d messages dead-lettered", cfg.Group, n)
		}
		res.duplicates += rows - distinct
		res.losses += total - distinct
		notes = append(notes, fmt.Sprintf("%s duplicates %d", map[bool]string{true: "transactional", false: "check-handle-mark"}[cfg.Transactional], rows-distinct))
	}
	res.note = strings.Join(notes, ", ")
	return res
}

// waitMembers waits until group has n members with partitions assigned.
func (r *ledgerRun) waitMembers(group string, n int) {
	r.t.Helper()
	adm := kafkatest.Admin(r.t, r.brokers)
	kafkatest.WaitFor(r.t, fmt.Sprintf("%d members of %s with partitions", n, group), func() bool {
		d, err := adm.DescribeGroups(context.Background(), group)
		if err != nil {
			return false
		}
		assigned := 0
		for _, m := range d[group].Members {
			if a, ok := m.Assigned.AsConsumer(); ok && len(a.Topics) > 0 {
				assigned++
			}
		}
		return assigned == n
	})
}

// waitLedgers waits until the ledger of each of groups holds n messages,
// failing the test after limit.
func (r *ledgerRun) waitLedgers(groups []consumerConfig, n int, limit time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var at []int
		done := true
		for _, cfg := range groups {
			_, d := r.ledgerIn(cfg.Schema)
			at = append(at, d)
			done = done && d >= n
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("ledgers at %v messages after %v, want %d each", at, limit, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
