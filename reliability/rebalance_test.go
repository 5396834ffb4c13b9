package reliability

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// rebalancePartitions is the partitions of TestRebalance's topic: enough
// for four consumers.
const rebalancePartitions = 8

// TestRebalance (scenario 5): two groups, one in the transactional mode
// and one in check-handle-mark (each with a ledger of its own), start with
// three consumers each on an 8-partition topic; 10 000 messages (by default:
// 2 000) go out in three parts, each next part as a fault begins. Once
// each group holds a delivery of the first part after its effect (see
// holds), a fourth consumer joins each group; once each holds one of the
// second part, the consumer of each that holds it closes. Each held
// delivery goes on until its partition's next owner has delivered its
// message again. Every message is handled, and exactly once in the
// transactional mode: a delivery of a partition that moved meets the
// claim of the delivery still running on the old owner.
func TestRebalance(t *testing.T) {
	r := newLedgerRun(t, rebalancePartitions)
	total := fullOrShort(10000, 2000) // distinct messages
	res := r.rebalance(t, keyedMessages("rebalance", total), 0)
	record(t, row{
		Checks:     "every message handled (both modes); transactional ledger exactly once",
		Faults:     "3 consumers a group, a 4th joins with 1/3 out, one holding a delivery closes with 2/3 out",
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
	logger := kototest.Logger(slog.LevelWarn)
	h := newTestHolds(t)
	groups := []consumerConfig{r.consumer(t, "rebalance-tx", true, ""), r.consumer(t, "rebalance-chm", false, "")}
	groups[1].Schema = pgtest.Schema(t, r.pool)
	r.prepare(groups[1].Schema)
	pools := make([]*pgxpool.Pool, len(groups))
	delivered := make([]*kototest.Counter, len(groups)) // deliveries by UUID, from the consumers' traces
	stops := map[string]func(){}                        // by consumer name
	start := func(g int) {
		cfg := groups[g]
		cfg.Name, cfg.Trace = fmt.Sprintf("%s/%d", cfg.Group, len(stops)), true
		stops[cfg.Name] = runConsumer(t, pools[g], cfg, h, traceCounter{delivered[g]}, logger)
	}
	for g := range groups {
		groups[g].Concurrency = concurrency
		pcfg := pgtest.Config(t)
		pcfg.MaxConns = rebalancePartitions + 4 // a connection per partition, and some to spare
		pools[g] = pgtest.PoolWith(t, pcfg)
		delivered[g] = new(kototest.Counter)
		for range 3 {
			start(g)
		}
	}
	parts := streamParts(total, 3)
	held := markHolds(msgs, parts, 2)
	stream := r.feed(msgs)
	stream.to(parts[1])
	// redelivered waits until each group delivered the message of hold k
	// again, while its first delivery is held: the partition moved (or
	// came back) under it.
	redelivered := func(k int) {
		t.Helper()
		id := msgs[held[k]].UUID
		kototest.WaitFor(t, fmt.Sprintf("each group to deliver message %s (hold %d) again", id, k), func() bool {
			for _, d := range delivered {
				if d.Get(id) < 2 {
					return false
				}
			}
			return true
		})
	}

	// A fourth consumer joins each group while it holds a delivery.
	r.waitHolding(h, 0, groups)
	for g := range groups {
		start(g)
	}
	stream.to(parts[2])
	redelivered(0)
	h.openTo(1)
	for _, cfg := range groups {
		r.waitMembers(cfg.Group, 4)
	}

	// The consumer of each group that holds a delivery closes.
	var closing sync.WaitGroup
	for _, name := range r.waitHolding(h, 1, groups) {
		closing.Go(stops[name])
	}
	stream.to(total)
	redelivered(1)
	h.openTo(2)
	closing.Wait()
	for _, cfg := range groups {
		r.waitMembers(cfg.Group, 3)
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

// waitHolding waits until a consumer of each of groups holds a delivery
// of hold k, and returns the name of one in each group.
func (r *ledgerRun) waitHolding(h *holds, k int, groups []consumerConfig) []string {
	r.t.Helper()
	var names []string
	kototest.WaitFor(r.t, fmt.Sprintf("a consumer of each group to hold a delivery of hold %d", k), func() bool {
		names = names[:0]
		held := h.holders(k)
		for _, cfg := range groups {
			i := slices.IndexFunc(held, func(name string) bool { return strings.HasPrefix(name, cfg.Group+"/") })
			if i < 0 {
				return false
			}
			names = append(names, held[i])
		}
		return true
	})
	return names
}

// waitMembers waits until group has n members with partitions assigned.
func (r *ledgerRun) waitMembers(group string, n int) {
	r.t.Helper()
	adm := kototest.Admin(r.t, r.brokers)
	kototest.WaitFor(r.t, fmt.Sprintf("%d members of %s with partitions", n, group), func() bool {
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
