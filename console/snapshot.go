package console

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/koto-dev/watermill-koto/internal/offsets"
)

// snapshot is what the overview shows, read at one moment.
type snapshot struct {
	At       time.Time
	Groups   []groupState
	Outboxes []outboxStatus
	Parked   []parkedStatus
	// Errors are what could not be read; the rest still shows.
	Errors []string
}

// groupState is one consumer group: its lag and its dead letters.
type groupState struct {
	Name       string
	State      string // Kafka's; empty for a group the cluster does not list
	Members    int
	Partitions []partitionLag
	Lag        int64
	// DeadLetters is how many records its dead-letter topic holds,
	// replayed ones included; Newest is when the newest failed.
	DeadLetters int64
	Newest      time.Time
}

// partitionLag is a group's position on one partition of a topic it
// consumes. Committed is -1 when the group committed nothing there: its
// lag counts from the partition's first record.
type partitionLag struct {
	Topic               string
	Partition           int32
	Committed, End, Lag int64
}

// take reads a snapshot now.
func (h *Handler) take(ctx context.Context) snapshot {
	s := snapshot{At: time.Now()}
	s.Groups = h.groupStates(ctx, &s)
	if h.cfg.Pool != nil {
		st, err := outboxStatuses(ctx, h.cfg.Pool, h.cfg.OutboxSchemas)
		s.Outboxes = st
		s.fail("outbox", err)
		parked, err := parkedStatuses(ctx, h.cfg.Pool, h.cfg.OutboxSchemas)
		s.Parked = parked
		s.fail("parked messages", err)
	}
	return s
}

func (s *snapshot) fail(what string, err error) {
	if err != nil {
		s.Errors = append(s.Errors, fmt.Sprintf("%s: %v", what, err))
	}
}

// groupStates reads every group's lag and dead letters.
func (h *Handler) groupStates(ctx context.Context, s *snapshot) []groupState {
	cluster, err := h.offsets.Groups()
	s.fail("consumer groups", err)
	topics, err := h.offsets.Topics()
	s.fail("topics", err)
	names := groupNames(h.cfg.Groups, cluster, topics)
	committed := map[string]map[string]map[int32]int64{}
	want := []string{}
	for _, g := range names {
		c, err := h.offsets.Committed(g)
		s.fail("offsets of "+g, err)
		committed[g] = c
		for t := range c {
			want = append(want, t)
		}
		want = append(want, deadLetterTopic(g))
	}
	spans, err := h.offsets.Spans(slices.Compact(slices.Sorted(slices.Values(want))))
	s.fail("topic offsets", err)
	states := make([]groupState, len(names))
	for i, g := range names {
		states[i] = newGroupState(g, cluster, committed[g], spans)
		dlq := spans[deadLetterTopic(g)]
		if states[i].DeadLetters > 0 {
			states[i].Newest, err = h.newest.of(ctx, g, dlq)
			s.fail("newest dead letter of "+g, err)
		}
	}
	return states
}

func newGroupState(name string, cluster []offsets.Group, committed map[string]map[int32]int64, spans map[string][]offsets.Partition) groupState {
	st := groupState{Name: name}
	if i := slices.IndexFunc(cluster, func(g offsets.Group) bool { return g.Name == name }); i >= 0 {
		st.State, st.Members = cluster[i].State, cluster[i].Members
	}
	for _, t := range slices.Sorted(maps.Keys(committed)) {
		for _, p := range spans[t] {
			pl := partitionLag{Topic: t, Partition: p.Partition, Committed: -1, End: p.End}
			from := p.Start
			if c, ok := committed[t][p.Partition]; ok {
				pl.Committed, from = c, max(c, p.Start)
			}
			pl.Lag = max(p.End-from, 0)
			st.Lag += pl.Lag
			st.Partitions = append(st.Partitions, pl)
		}
	}
	for _, p := range spans[deadLetterTopic(name)] {
		st.DeadLetters += max(p.End-p.Start, 0)
	}
	return st
}
