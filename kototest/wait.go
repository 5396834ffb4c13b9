package kototest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/koto-dev/watermill-koto/outbox"
)

// lookInterval is how often Wait reads the broker and the outbox between
// the deliveries' own wake-ups: what a forwarder or another client writes
// shows there, not in the router.
const lookInterval = 5 * time.Millisecond

// lookTimeout bounds one look at the broker and the outbox.
const lookTimeout = 5 * time.Second

// Wait returns once everything published so far, and everything it
// caused, has been handled or dead-lettered (see Waiting in the package
// doc). It fails the test after the harness's timeout, naming what is
// still pending: deliveries in flight, outbox rows, and for each topic and
// partition the offsets a group has not finished, or that no group reads.
func (h *Harness) Wait() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.timeout)
	defer cancel()
	if err := h.WaitContext(ctx); err != nil {
		h.t.Fatalf("kototest: %v", err)
	}
}

// WaitContext is [Harness.Wait] bounded by ctx rather than the harness's
// timeout; it returns an error that lists what is pending when ctx ends
// first.
func (h *Harness) WaitContext(ctx context.Context) error {
	start := time.Now()
	var last *look
	for {
		wake, _ := h.track.wake()
		// Each look runs to its end: cut short by ctx, it would say less
		// than the one before.
		lookCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookTimeout)
		now := h.look(lookCtx)
		cancel()
		if len(now.pending) == 0 && last != nil && len(last.pending) == 0 && now.same(last) {
			return nil
		}
		last = &now
		if len(now.pending) == 0 {
			continue // look again at once: see look
		}
		t := time.NewTimer(lookInterval)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waited %v; still pending:\n  %s", time.Since(start).Round(time.Millisecond), strings.Join(now.pending, "\n  "))
		}
		t.Stop()
	}
}

// look is what one look at the broker, the router and the outbox found.
// Its parts are read one after the other, in the order a message moves
// against (Kafka, then the deliveries, then the outbox), so a message can
// still move between them unseen: from the outbox into Kafka after Kafka
// was read, say. It cannot do so in two looks in a row, so two looks that
// find nothing pending, with the same Kafka ends and no delivery begun or
// ended in between, have seen everything.
type look struct {
	pending []string
	ends    map[string]int64 // "topic/partition" → end offset
	version uint64           // the tracker's
}

func (l look) same(o *look) bool {
	return l.version == o.version && maps.Equal(l.ends, o.ends)
}

// look lists what keeps a Wait waiting; empty when nothing does.
func (h *Harness) look(ctx context.Context) look {
	_, version := h.track.wake()
	l := look{version: version}
	l.pending, l.ends = h.kafkaPending(ctx)
	for _, d := range h.track.flying() {
		l.pending = append(l.pending, fmt.Sprintf("in flight: handler %s, %s/%d/%d, message %s", d.handler, d.pos.Topic, d.pos.Partition, d.pos.Offset, d.msg.UUID))
	}
	l.pending = append(l.pending, h.outboxPending(ctx)...)
	return l
}

// outboxPending lists the outbox tables of the harness's schema with rows
// not forwarded yet, or scheduled messages due and not moved yet.
func (h *Harness) outboxPending(ctx context.Context) []string {
	if h.pool == nil {
		return nil
	}
	tables, err := outbox.FindTables(ctx, h.pool, h.schema)
	if err != nil {
		return []string{fmt.Sprintf("outbox tables of %s: %v", h.schema, err)}
	}
	var out []string
	for _, cfg := range tables {
		table := pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize()
		scheduled, _ := scheduleTables(cfg)
		var rows, due int64
		err := h.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+table+"), (SELECT count(*) FROM "+scheduled+" WHERE due_at <= now())").Scan(&rows, &due)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("outbox %s: %v", table, err))
		case rows > 0:
			out = append(out, fmt.Sprintf("outbox %s: %d row(s) not forwarded yet", table, rows))
		case due > 0:
			out = append(out, fmt.Sprintf("outbox %s: %d scheduled message(s) due and not moved into it yet", table, due))
		}
	}
	return out
}

// kafkaPending lists, for each partition of each topic that holds
// records, the groups that have not finished it, or says that no group
// reads it (unless it is a sink); and returns the ends it read.
func (h *Harness) kafkaPending(ctx context.Context) ([]string, map[string]int64) {
	topics, err := h.admin.ListTopics(ctx)
	if err != nil {
		return []string{fmt.Sprintf("list topics: %v", err)}, nil
	}
	names := topics.Names()
	if len(names) == 0 {
		return nil, nil
	}
	starts, err1 := h.admin.ListStartOffsets(ctx, names...)
	ends, err2 := h.admin.ListEndOffsets(ctx, names...)
	readers, err3 := h.readers(ctx)
	if err := errors.Join(err1, err2, err3); err != nil {
		return []string{fmt.Sprintf("read the broker's offsets: %v", err)}, nil
	}
	var out []string
	seen := map[string]int64{}
	ends.Each(func(end kadm.ListedOffset) {
		seen[fmt.Sprintf("%s/%d", end.Topic, end.Partition)] = end.Offset
		start, _ := starts.Lookup(end.Topic, end.Partition)
		if end.Err != nil || end.Offset <= start.Offset {
			return
		}
		out = append(out, h.partitionPending(end.Topic, end.Partition, start.Offset, end.Offset, readers[end.Topic])...)
	})
	slices.Sort(out)
	return out, seen
}

// partitionPending lists what of one partition's offsets, from start to
// end, groups have not finished.
func (h *Harness) partitionPending(topic string, partition int32, start, end int64, groups []groupReader) []string {
	if len(groups) == 0 {
		if h.isSink(topic) {
			return nil
		}
		return []string{fmt.Sprintf("%s/%d: offsets %d to %d not consumed: no consumer group reads %s (a consumer not registered, or a router not running? name the topic in kototest.Sinks if nothing in the test reads it)",
			topic, partition, start, end-1, topic)}
	}
	var out []string
	for _, g := range groups {
		done := max(h.track.done(partitionOf{g.name, topic, partition}, start), g.committed[partition])
		if done < end {
			out = append(out, fmt.Sprintf("%s/%d: group %s has offsets %d to %d to finish", topic, partition, g.name, done, end-1))
		}
	}
	return out
}

// groupReader is a consumer group that reads a topic, with the offsets it
// committed on it.
type groupReader struct {
	name      string
	committed map[int32]int64
}

// readers returns, by topic, the groups whose members subscribe to it.
func (h *Harness) readers(ctx context.Context) (map[string][]groupReader, error) {
	listed, err := h.admin.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	described, err := h.admin.DescribeGroups(ctx, listed.Groups()...)
	if err != nil {
		return nil, err
	}
	out := map[string][]groupReader{}
	for _, g := range described.Sorted() {
		subscribed := map[string]bool{}
		for _, m := range g.Members {
			if c, ok := m.Join.AsConsumer(); ok {
				for _, t := range c.Topics {
					subscribed[t] = true
				}
			}
		}
		if len(subscribed) == 0 {
			continue
		}
		offsets, err := h.admin.FetchOffsets(ctx, g.Group)
		if err != nil {
			return nil, err
		}
		for t := range subscribed {
			r := groupReader{name: g.Group, committed: map[int32]int64{}}
			offsets.Each(func(o kadm.OffsetResponse) {
				if o.Topic == t && o.Err == nil {
					r.committed[o.Partition] = o.At
				}
			})
			out[t] = append(out[t], r)
		}
	}
	return out, nil
}

// isSink reports whether nothing in the test needs to read topic.
func (h *Harness) isSink(topic string) bool {
	return strings.HasSuffix(topic, ".dlq") || strings.HasSuffix(topic, ".replies") || slices.Contains(h.opts.sinks, topic)
}
