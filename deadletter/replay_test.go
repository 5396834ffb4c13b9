package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/deadletter"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestListReplayFilteredThenNothingMore dead-letters six messages through
// the real middleware, lists them, replays the three of one type once the
// handler is fixed, sees the handler process exactly those, replays again
// and sends nothing, then replays the rest without a filter: no dead
// letter is lost to an earlier filter, none is sent twice.
func TestListReplayFilteredThenNothingMore(t *testing.T) {
	e := newEnv(t)
	c := &consumer{bug: errBug}
	e.run(t, c, e.group)
	placed := e.publish(t, "order-placed", "p1", "p2", "p3")
	cancelled := e.publish(t, "order-cancelled", "c1", "c2", "c3")
	q := e.queue(t, deadletter.Config{})

	letters := waitForDeadLetters(t, q, 6)
	for _, l := range letters {
		checkDeadLetter(t, l, e)
	}
	ctx := kototest.Context(t)
	if got, err := q.List(ctx, deadletter.Filter{TypeName: "order-placed"}); err != nil || len(got) != 3 {
		t.Fatalf("List(order-placed) = %d letters, %v; want 3", len(got), err)
	}

	c.setBug(nil)
	res, err := q.Replay(ctx, deadletter.Filter{TypeName: "order-placed"}, deadletter.ReplayOptions{})
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if res.Sent != 3 || res.AlreadyReplayed != 0 || res.Unroutable != 0 {
		t.Fatalf("Replay(order-placed) = %+v, want 3 sent", res)
	}
	kototest.WaitFor(t, "the fixed handler to process the replayed order-placed", func() bool {
		handled, _ := c.snapshot()
		return len(handled) >= 3
	})
	if got := e.replayedUUIDs(t); !slices.Equal(got, sorted(placed)) {
		t.Fatalf("replayed copies on %s: %v, want the order-placed ones %v", e.topic, got, sorted(placed))
	}

	res, err = q.Replay(ctx, deadletter.Filter{TypeName: "order-placed"}, deadletter.ReplayOptions{})
	if err != nil || res.Sent != 0 || res.AlreadyReplayed != 3 {
		t.Fatalf("second Replay(order-placed) = %+v, %v; want nothing sent, 3 already replayed", res, err)
	}
	listed, err := q.List(ctx, deadletter.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range listed {
		if want := slices.Contains(placed, l.UUID); l.Replayed != want {
			t.Errorf("dead letter %s (%s): Replayed = %v, want %v", l.UUID, l.TypeName, l.Replayed, want)
		}
	}

	res, err = q.Replay(ctx, deadletter.Filter{}, deadletter.ReplayOptions{})
	if err != nil || res.Sent != 3 || res.AlreadyReplayed != 3 {
		t.Fatalf("Replay(all) = %+v, %v; want the 3 order-cancelled sent", res, err)
	}
	if res, err = q.Replay(ctx, deadletter.Filter{}, deadletter.ReplayOptions{}); err != nil || res.Sent != 0 {
		t.Fatalf("last Replay(all) = %+v, %v; want nothing sent", res, err)
	}
	all := append(slices.Clone(placed), cancelled...)
	kototest.WaitFor(t, "every dead letter handled", func() bool {
		handled, _ := c.snapshot()
		return len(handled) >= 6
	})
	if got := e.replayedUUIDs(t); !slices.Equal(got, sorted(all)) {
		t.Fatalf("replayed copies: %v, want each dead letter once: %v", got, sorted(all))
	}
	handled, duplicates := c.snapshot()
	if !slices.Equal(sorted(handled), sorted(all)) || len(duplicates) != 0 {
		t.Fatalf("handled %v (duplicates %v), want each of %v once", handled, duplicates, all)
	}
}

// checkDeadLetter checks what the middleware recorded, as List reads it.
func checkDeadLetter(t *testing.T, l *deadletter.Letter, e *env) {
	t.Helper()
	switch {
	case l.UUID == "" || (l.TypeName != "order-placed" && l.TypeName != "order-cancelled"):
		t.Errorf("letter %d/%d: UUID %q, type %q", l.Partition, l.Offset, l.UUID, l.TypeName)
	case l.ErrorClass == "" || l.ErrorClass != l.Metadata.Get("dead_letter_error_class") || !strings.Contains(l.Reason, errBug.Error()):
		t.Errorf("letter %s: class %q reason %q, want a class and %v", l.UUID, l.ErrorClass, l.Reason, errBug)
	case l.OriginalTopic != e.topic || l.OriginalPartition < 0 || l.OriginalOffset < 0:
		t.Errorf("letter %s: from %s/%d/%d, want %s", l.UUID, l.OriginalTopic, l.OriginalPartition, l.OriginalOffset, e.topic)
	case l.ConsumerGroup != e.group || l.Handler != e.group || l.Attempts != 1:
		t.Errorf("letter %s: group %q handler %q attempts %d", l.UUID, l.ConsumerGroup, l.Handler, l.Attempts)
	case l.FailedAt.IsZero() || time.Since(l.FailedAt) > time.Hour || l.Replayed:
		t.Errorf("letter %s: failed at %v, replayed %v", l.UUID, l.FailedAt, l.Replayed)
	case l.Metadata.Get("dead_letter_reason") != l.Reason:
		t.Errorf("letter %s: metadata %v", l.UUID, l.Metadata)
	}
}

// TestInterruptedReplayResumes cancels a replay after its first batch; the
// next replay sends the rest, and no dead letter reaches the original
// topic twice.
func TestInterruptedReplayResumes(t *testing.T) {
	e := newEnv(t)
	c := &consumer{bug: errBug}
	e.run(t, c, e.group)
	uuids := e.publish(t, "order-placed", "1", "2", "3", "4", "5", "6", "7")
	q := e.queue(t, deadletter.Config{BatchSize: 2})
	waitForDeadLetters(t, q, len(uuids))
	c.setBug(nil)

	ctx, cancel := context.WithCancel(kototest.Context(t))
	var batches int
	res, err := q.Replay(ctx, deadletter.Filter{}, deadletter.ReplayOptions{Progress: func(p deadletter.ReplayProgress) {
		if len(p.Sent) > 0 {
			batches++
			cancel() // interrupted in the middle
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Replay: %+v, %v; want context.Canceled", res, err)
	}
	if batches != 1 || res.Sent != 2 {
		t.Fatalf("interrupted Replay sent %d in %d batches, want one batch of 2", res.Sent, batches)
	}

	res, err = q.Replay(kototest.Context(t), deadletter.Filter{}, deadletter.ReplayOptions{})
	if err != nil || res.Sent != len(uuids)-2 || res.AlreadyReplayed != 2 {
		t.Fatalf("resumed Replay = %+v, %v; want the %d not sent yet", res, err, len(uuids)-2)
	}
	if got := e.replayedUUIDs(t); !slices.Equal(got, sorted(uuids)) {
		t.Fatalf("replayed copies %v, want each dead letter once: %v", got, sorted(uuids))
	}
	kototest.WaitFor(t, "every replay handled", func() bool {
		handled, _ := c.snapshot()
		return len(handled) >= len(uuids)
	})
}

// TestReplayThatFailsAgainComesBack: a replay to a handler that still
// fails lands on the dead-letter topic again, with the new failure in its
// metadata and where it was replayed from; the next replay sends only that
// new dead letter.
func TestReplayThatFailsAgainComesBack(t *testing.T) {
	e := newEnv(t)
	c := &consumer{bug: errBug}
	e.run(t, c, e.group)
	uuid := e.publish(t, "order-placed", "only")[0]
	q := e.queue(t, deadletter.Config{})
	first := waitForDeadLetters(t, q, 1)[0]

	c.setBug(errors.New("currency is unknown"))
	ctx := kototest.Context(t)
	if res, err := q.Replay(ctx, deadletter.Filter{}, deadletter.ReplayOptions{}); err != nil || res.Sent != 1 {
		t.Fatalf("Replay = %+v, %v; want 1 sent", res, err)
	}
	letters := waitForDeadLetters(t, q, 2)
	again := letters[0]
	if again.Offset == first.Offset && again.Partition == first.Partition {
		again = letters[1]
	}
	wantFrom := fmt.Sprintf("%s/%d/%d", e.dlq, first.Partition, first.Offset)
	switch {
	case again.UUID != uuid || !strings.Contains(again.Reason, "currency is unknown"):
		t.Errorf("second dead letter: UUID %s reason %q, want %s with the new reason", again.UUID, again.Reason, uuid)
	case again.Metadata.Get(replayedFromKey) != wantFrom:
		t.Errorf("second dead letter replayed from %q, want %q", again.Metadata.Get(replayedFromKey), wantFrom)
	case again.OriginalTopic != e.topic || again.OriginalOffset == first.OriginalOffset && again.OriginalPartition == first.OriginalPartition:
		t.Errorf("second dead letter from %s/%d/%d, want the replayed copy's position, not the first's (%d/%d)",
			again.OriginalTopic, again.OriginalPartition, again.OriginalOffset, first.OriginalPartition, first.OriginalOffset)
	case !again.FailedAt.After(first.FailedAt) || again.Replayed:
		t.Errorf("second dead letter failed at %v (first %v), replayed %v", again.FailedAt, first.FailedAt, again.Replayed)
	}

	c.setBug(nil)
	res, err := q.Replay(ctx, deadletter.Filter{}, deadletter.ReplayOptions{})
	if err != nil || res.Sent != 1 || res.AlreadyReplayed != 1 {
		t.Fatalf("Replay after the fix = %+v, %v; want only the new dead letter sent", res, err)
	}
	kototest.WaitFor(t, "the fixed handler", func() bool {
		handled, _ := c.snapshot()
		return len(handled) == 1
	})
}

// TestDryRunSendsNothing: a dry run reports what would go, and neither
// sends nor records it.
func TestDryRunSendsNothing(t *testing.T) {
	e := newEnv(t)
	c := &consumer{bug: errBug}
	e.run(t, c, e.group)
	uuids := e.publish(t, "order-placed", "a", "b", "c")
	q := e.queue(t, deadletter.Config{})
	waitForDeadLetters(t, q, 3)

	ctx := kototest.Context(t)
	var planned []string
	res, err := q.Replay(ctx, deadletter.Filter{UUIDs: uuids[1:]}, deadletter.ReplayOptions{DryRun: true, Progress: func(p deadletter.ReplayProgress) {
		for _, r := range p.Sent {
			if r.ToTopic != e.topic || r.ToOffset != -1 {
				t.Errorf("dry run: %s to %s offset %d", r.UUID, r.ToTopic, r.ToOffset)
			}
			planned = append(planned, r.UUID)
		}
	}})
	if err != nil || res.Sent != 2 || !res.DryRun {
		t.Fatalf("dry run = %+v, %v; want 2 that would be sent", res, err)
	}
	if !slices.Equal(sorted(planned), sorted(uuids[1:])) {
		t.Fatalf("dry run planned %v, want %v", planned, uuids[1:])
	}
	if got := e.replayedUUIDs(t); len(got) != 0 {
		t.Fatalf("a dry run sent %v", got)
	}
	if res, err := q.Replay(ctx, deadletter.Filter{}, deadletter.ReplayOptions{DryRun: true}); err != nil || res.Sent != 3 {
		t.Fatalf("second dry run = %+v, %v; want all 3 still to send", res, err)
	}
}

// TestReplayUpToEnds: a dry run and then a replay given the same Ends:
// the replay sends what the dry run counted, not a dead letter that
// arrived in between; the next replay sends that one.
func TestReplayUpToEnds(t *testing.T) {
	e := newEnv(t)
	c := &consumer{bug: errBug}
	e.run(t, c, e.group)
	counted := e.publish(t, "order-placed", "a", "b")
	q := e.queue(t, deadletter.Config{})
	waitForDeadLetters(t, q, 2)
	ctx := kototest.Context(t)
	ends, err := q.Ends(ctx)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := q.Replay(ctx, deadletter.Filter{TypeName: "order-placed"}, deadletter.ReplayOptions{DryRun: true, Ends: ends})
	if err != nil || plan.Sent != 2 || plan.ToScan != 2 {
		t.Fatalf("dry run = %+v, %v; want 2 to send of 2", plan, err)
	}
	late := e.publish(t, "order-placed", "c")
	waitForDeadLetters(t, q, 3)
	c.setBug(nil)

	res, err := q.Replay(ctx, deadletter.Filter{TypeName: "order-placed"}, deadletter.ReplayOptions{Ends: ends})
	if err != nil || res.Sent != 2 || res.ToScan != plan.ToScan {
		t.Fatalf("Replay up to the dry run's ends = %+v, %v; want the 2 it counted, of %d scanned", res, err, plan.ToScan)
	}
	if got := e.replayedUUIDs(t); !slices.Equal(got, sorted(counted)) {
		t.Fatalf("replayed %v, want only %v, counted by the dry run", got, sorted(counted))
	}
	if res, err := q.Replay(ctx, deadletter.Filter{TypeName: "order-placed"}, deadletter.ReplayOptions{}); err != nil || res.Sent != 1 {
		t.Fatalf("next Replay = %+v, %v; want %v, which arrived after the dry run", res, err, late)
	}
}

// TestReplayLimit: Limit makes a canary replay of one; the next replay
// continues with the others.
func TestReplayLimit(t *testing.T) {
	e := newEnv(t)
	c := &consumer{bug: errBug}
	e.run(t, c, e.group)
	e.publish(t, "order-placed", "a", "b", "c")
	q := e.queue(t, deadletter.Config{})
	waitForDeadLetters(t, q, 3)
	c.setBug(nil)
	ctx := kototest.Context(t)
	if res, err := q.Replay(ctx, deadletter.Filter{Limit: 1}, deadletter.ReplayOptions{}); err != nil || res.Sent != 1 {
		t.Fatalf("Replay(Limit 1) = %+v, %v", res, err)
	}
	if res, err := q.Replay(ctx, deadletter.Filter{}, deadletter.ReplayOptions{}); err != nil || res.Sent != 2 || res.AlreadyReplayed != 1 {
		t.Fatalf("Replay after the canary = %+v, %v; want the other 2", res, err)
	}
}

// TestReplayReturnsToTheOriginalPartition dead-letters records that their
// producer put on partitions of its own choosing, each key on every
// partition and one record without a key, so that whatever the services'
// partitioner does with a key, most copies were consumed elsewhere: the
// replay sends each back to the partition it was consumed from. A dead
// letter from a partition the topic no longer has goes where the services'
// publisher puts its key.
func TestReplayReturnsToTheOriginalPartition(t *testing.T) {
	e := newEnv(t)
	c := &consumer{bug: errBug}
	e.run(t, c, e.group)
	partitionOf := map[string]int32{} // by UUID
	var recs []*kgo.Record
	for _, key := range []string{"k-1", "k-2", ""} {
		for p := range int32(3) {
			uuid := watermill.NewUUID()
			rec := kototest.Record(e.topic, uuid, key, []byte(`{"key":"`+key+`"}`))
			rec.Partition = p
			recs = append(recs, rec)
			partitionOf[uuid] = p
		}
	}
	kototest.Produce(t, e.brokers, recs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	q := e.queue(t, deadletter.Config{})
	waitForDeadLetters(t, q, len(recs))

	gone := watermill.NewUUID()
	kototest.Produce(t, e.brokers, []*kgo.Record{{Topic: e.dlq, Key: []byte("k-gone"), Value: []byte(`{}`), Headers: []kgo.RecordHeader{
		{Key: kafka.UUIDHeaderKey, Value: []byte(gone)}, {Key: "dead_letter_original_topic", Value: []byte(e.topic)},
		{Key: "dead_letter_original_partition", Value: []byte("7")}, {Key: "dead_letter_original_offset", Value: []byte("0")},
	}}})
	// The probe finds the bug fixed, so it is handled, not dead-lettered.
	c.setBug(nil)
	probe := message.NewMessage(watermill.NewUUID(), []byte(`{}`))
	probe.Metadata.Set(koto.PartitionKeyMetadataKey, "k-gone")
	if err := e.pub.Publish(e.topic, probe); err != nil {
		t.Fatal(err)
	}
	if res, err := q.Replay(kototest.Context(t), deadletter.Filter{}, deadletter.ReplayOptions{}); err != nil || res.Sent != len(recs)+1 {
		t.Fatalf("Replay = %+v, %v; want %d sent", res, err, len(recs)+1)
	}
	landed := map[string]int32{}
	for _, rec := range kototest.ReadAll(t, e.brokers, e.topic) {
		uuid := header(rec, kafka.UUIDHeaderKey)
		switch {
		case uuid == probe.UUID:
			partitionOf[gone] = rec.Partition
		case header(rec, replayedFromKey) != "":
			landed[uuid] = rec.Partition
		}
	}
	if len(landed) != len(partitionOf) {
		t.Fatalf("%d replayed records, want %d", len(landed), len(partitionOf))
	}
	for uuid, want := range partitionOf {
		if got := landed[uuid]; got != want {
			t.Errorf("replay of %s landed on partition %d, want %d", uuid, got, want)
		}
	}
}

// header returns the value of rec's header key.
func header(rec *kgo.Record, key string) string {
	for _, h := range rec.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
