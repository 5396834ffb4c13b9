package deadletter_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/koto-dev/watermill-koto/deadletter"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestDiscardIsSkippedByReplays dead-letters four messages, discards two
// (a dry run first, which records nothing), and replays everything: the
// replay sends the other two alone and counts the discarded ones; List
// and Show tell discarded from replayed, before and after the replay;
// nothing is deleted; the replay group's commit is in the format with
// discards.
func TestDiscardIsSkippedByReplays(t *testing.T) {
	e := newEnv(t)
	c := &consumer{bug: errBug}
	e.run(t, c, e.group)
	uuids := e.publish(t, "order-placed", "a", "b", "c", "d")
	junk, kept := uuids[:2], uuids[2:]
	q := e.queue(t, deadletter.Config{})
	waitForDeadLetters(t, q, 4)
	ctx := kototest.Context(t)

	res, err := q.Discard(ctx, deadletter.Filter{UUIDs: junk}, deadletter.ReplayOptions{DryRun: true})
	if err != nil || res.Discarded != 2 || res.Sent != 0 {
		t.Fatalf("Discard dry run = %+v, %v; want 2 that would be discarded", res, err)
	}
	checkStates(t, q, nil, nil)
	var reported []string
	res, err = q.Discard(ctx, deadletter.Filter{UUIDs: junk}, deadletter.ReplayOptions{Progress: func(p deadletter.ReplayProgress) {
		for _, l := range p.Discarded {
			reported = append(reported, l.UUID)
		}
	}})
	if err != nil || res.Discarded != 2 || !slices.Equal(sorted(reported), sorted(junk)) {
		t.Fatalf("Discard = %+v, %v, reported %v; want %v discarded", res, err, reported, junk)
	}
	checkStates(t, q, junk, nil)
	if res, err = q.Discard(ctx, deadletter.Filter{UUIDs: junk[:1]}, deadletter.ReplayOptions{}); err != nil || res.Discarded != 0 || res.AlreadyDiscarded != 1 {
		t.Fatalf("Discard again = %+v, %v; want 1 already discarded", res, err)
	}

	c.setBug(nil)
	res, err = q.Replay(ctx, deadletter.Filter{}, deadletter.ReplayOptions{})
	if err != nil || res.Sent != 2 || res.AlreadyDiscarded != 2 || res.AlreadyReplayed != 0 {
		t.Fatalf("Replay = %+v, %v; want 2 sent and 2 already discarded", res, err)
	}
	kototest.WaitFor(t, "the replayed dead letters handled", func() bool {
		handled, _ := c.snapshot()
		return len(handled) >= 2
	})
	if got := e.replayedUUIDs(t); !slices.Equal(got, sorted(kept)) {
		t.Fatalf("replayed %v, want only %v", got, sorted(kept))
	}
	checkStates(t, q, junk, kept)
	if res, err = q.Discard(ctx, deadletter.Filter{}, deadletter.ReplayOptions{}); err != nil || res.Discarded != 0 || res.AlreadyReplayed != 2 || res.AlreadyDiscarded != 2 {
		t.Fatalf("Discard of everything after the replay = %+v, %v; want nothing more", res, err)
	}
	if n := kototest.Records(t, e.brokers, e.dlq); n != 4 {
		t.Errorf("%s holds %d records, want the 4 dead letters still", e.dlq, n)
	}
	withDiscards := 0
	for p, o := range kototest.CommittedOffsets(t, e.brokers, q.ReplayGroup(), e.dlq) {
		switch {
		case strings.HasPrefix(o.Metadata, "dlq2:"):
			withDiscards++
		case o.Metadata != "":
			t.Errorf("replay group commit of partition %d: %.20q, want the format with discards, or none", p, o.Metadata)
		}
	}
	if withDiscards == 0 {
		t.Error("no commit of the replay group records the discards")
	}
}

// checkStates lists q and checks which dead letters are discarded and
// which replayed, by UUID, and shows the first discarded one.
func checkStates(t *testing.T, q *deadletter.Queue, discarded, replayed []string) {
	t.Helper()
	ls, err := q.List(kototest.Context(t), deadletter.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Discarded != slices.Contains(discarded, l.UUID) || l.Replayed != slices.Contains(replayed, l.UUID) {
			t.Errorf("dead letter %s: discarded %v replayed %v; want discarded %v replayed %v", l.UUID, l.Discarded, l.Replayed, discarded, replayed)
		}
		if len(discarded) > 0 && l.UUID == discarded[0] {
			shown, err := q.Show(kototest.Context(t), l.Partition, l.Offset)
			if err != nil || !shown.Discarded || shown.Replayed {
				t.Errorf("Show of discarded %s: %+v, %v", l.UUID, shown, err)
			}
		}
	}
}
