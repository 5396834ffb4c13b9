package deadletter

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/IBM/sarama"
)

// progressEvery is how many scanned records at most pass between two
// calls of ReplayOptions.Progress.
const progressEvery = 1000

// ReplayOptions configures one [Queue.Replay] or [Queue.Discard]. The
// zero value replays, or discards.
type ReplayOptions struct {
	// DryRun selects what would be sent, or discarded, and reports it
	// through Progress and the result, without sending or recording
	// anything.
	DryRun bool
	// Ends, if set, are the end offsets by partition ([Queue.Ends]) up to
	// which the replay reads, where the topic's ends are higher: given
	// the same Ends as a dry run, a replay selects nothing the dry run did
	// not count. A partition not in Ends is not read.
	Ends map[int32]int64
	// Progress, if set, is called on the replay's goroutine after each
	// batch and at least every 1000 scanned records.
	Progress func(ReplayProgress)
}

// ReplayResult counts what a replay, or a discard, did.
type ReplayResult struct {
	// ToScan is how many offsets of the dead-letter topic the replay reads:
	// all it held when the replay started, so that AlreadyReplayed counts
	// every selected dead letter sent before. Scanned is how many it has
	// read.
	ToScan, Scanned int64
	// Sent is how many dead letters Kafka acknowledged (with DryRun, how
	// many would be sent). Unless the replay returns an error that says
	// otherwise, all of them are recorded in the replay group. A discard
	// sends none.
	Sent int
	// Discarded is how many dead letters a discard recorded as discarded
	// (with DryRun, how many it would). A replay discards none.
	Discarded int
	// AlreadyReplayed is how many selected dead letters were passed over
	// because the replay group records them as sent.
	AlreadyReplayed int
	// AlreadyDiscarded is how many selected dead letters were passed over
	// because the replay group records them as discarded.
	AlreadyDiscarded int
	// Unroutable is how many selected dead letters a replay did not send
	// because they name no original topic (a record that the middleware
	// did not write) or hold no payload (Letter.Dropped). They stay where
	// they are; a discard can still discard them.
	Unroutable int
	// DryRun is ReplayOptions.DryRun.
	DryRun bool
}

// ReplayProgress is what ReplayOptions.Progress receives.
type ReplayProgress struct {
	// Result is the count so far.
	Result ReplayResult
	// Sent are the dead letters sent (with DryRun: selected) since the
	// previous call.
	Sent []Replayed
	// Discarded are the dead letters a discard recorded (with DryRun:
	// selected) since the previous call.
	Discarded []*Letter
	// Unroutable are the selected dead letters without an original topic,
	// or without their payload (Letter.Dropped), that a replay found since
	// the previous call.
	Unroutable []*Letter
}

// Replayed is a dead letter that a replay sent.
type Replayed struct {
	*Letter
	// ToTopic is where it went, Letter.OriginalTopic.
	ToTopic string `json:"to_topic"`
	// ToPartition and ToOffset are where it landed; -1 with DryRun.
	ToPartition int32 `json:"to_partition"`
	ToOffset    int64 `json:"to_offset"`
}

// Replay sends the dead letters that f selects, and that the replay group
// records as neither replayed nor discarded, back to their original
// topics and partitions as they were consumed (see Replay in the package
// documentation). It reads the topic as it was when Replay started,
// partition by partition in offset order, sends in batches of
// Config.BatchSize and records each batch in the replay group once Kafka
// has acknowledged it. The package documentation says what a crash or a
// cancelled ctx leaves.
//
// It returns what it did so far along with any error. A dead letter that
// Kafka refuses fails the replay after the others of its batch are
// recorded; a new Replay retries it.
func (q *Queue) Replay(ctx context.Context, f Filter, opts ReplayOptions) (ReplayResult, error) {
	return q.resolve(ctx, f, opts, false)
}

// Discard records the dead letters that f selects, and that the replay
// group records as neither replayed nor discarded, as discarded, so that
// no replay sends them (see Discard in the package documentation). It
// sends and deletes nothing, reads the topic as Replay does and records in
// batches of Config.BatchSize.
func (q *Queue) Discard(ctx context.Context, f Filter, opts ReplayOptions) (ReplayResult, error) {
	return q.resolve(ctx, f, opts, true)
}

// resolve replays, or discards, what f selects.
func (q *Queue) resolve(ctx context.Context, f Filter, opts ReplayOptions, discard bool) (ReplayResult, error) {
	r := &replayer{ctx: ctx, q: q, f: f, opts: opts, discard: discard}
	r.result.DryRun = opts.DryRun
	if err := f.Validate(); err != nil {
		return r.result, err
	}
	ranges, err := q.ranges(ctx)
	if err != nil {
		return r.result, err
	}
	ranges = ranges.upTo(opts.Ends)
	if r.done, err = q.replay.fetch(ctx, ranges.partitions()); err != nil {
		return r.result, err
	}
	for _, pr := range ranges {
		done := r.done[pr.partition]
		done.floor(pr.start)
		r.done[pr.partition] = done
	}
	r.result.ToScan = ranges.records()
	if !opts.DryRun {
		if err := q.replay.checkUnused(ctx); err != nil {
			return r.result, err
		}
	}
	if !opts.DryRun && !discard {
		if r.producer, err = newReplayProducer(q.cfg.Broker); err != nil {
			return r.result, fmt.Errorf("deadletter: %w", err)
		}
		defer r.producer.Close()
	}
	if err = q.scan(ctx, ranges, r.take); err == nil {
		err = r.flush(ctx) // reports
	} else {
		r.report()
	}
	return r.result, err
}

// replayer is the state of one Replay, or Discard.
type replayer struct {
	ctx      context.Context // of the Replay call
	q        *Queue
	f        Filter
	opts     ReplayOptions
	discard  bool
	producer sarama.SyncProducer // nil with DryRun, or for a discard
	done     map[int32]progress

	result       ReplayResult
	batch        []*Letter
	sent         []Replayed // since the last report
	discarded    []*Letter  // since the last report
	unroutable   []*Letter  // since the last report
	lastReported int64      // Scanned at the last report
}

// taken is how many dead letters r sent or discarded so far.
func (r *replayer) taken() int { return r.result.Sent + r.result.Discarded }

// take handles one scanned dead letter; it returns false once f.Limit is
// reached.
func (r *replayer) take(l *Letter) (bool, error) {
	r.result.Scanned++
	if r.f.Match(l) {
		r.selectLetter(l)
	}
	var err error
	limitReached := r.f.Limit > 0 && r.taken()+len(r.batch) >= r.f.Limit
	if len(r.batch) >= r.q.cfg.BatchSize || limitReached {
		err = r.flush(r.ctx)
	} else if r.result.Scanned-r.lastReported >= progressEvery {
		r.report()
	}
	return !limitReached, err
}

func (r *replayer) selectLetter(l *Letter) {
	switch {
	case r.resolved(l):
	case !r.discard && (l.OriginalTopic == "" || l.Dropped != ""):
		r.result.Unroutable++
		r.unroutable = append(r.unroutable, l)
	default:
		r.batch = append(r.batch, l)
	}
}

// resolved counts l when the replay group records it as replayed or
// discarded, and reports whether it does.
func (r *replayer) resolved(l *Letter) bool {
	done := r.done[l.Partition]
	switch {
	case done.isDiscarded(l.Offset):
		r.result.AlreadyDiscarded++
	case done.has(l.Offset):
		r.result.AlreadyReplayed++
	default:
		return false
	}
	return true
}

// flush sends, or discards, the batch and records it, then reports.
func (r *replayer) flush(ctx context.Context) error {
	batch := r.batch
	r.batch = nil
	var err error
	switch {
	case len(batch) == 0:
	case r.opts.DryRun && r.discard:
		r.discarded = append(r.discarded, batch...)
		r.result.Discarded += len(batch)
	case r.opts.DryRun:
		for _, l := range batch {
			r.sent = append(r.sent, Replayed{Letter: l, ToTopic: l.OriginalTopic, ToPartition: -1, ToOffset: -1})
		}
		r.result.Sent += len(batch)
	case r.discard:
		err = r.discardBatch(ctx, batch)
	default:
		err = r.send(ctx, batch)
	}
	r.report()
	return err
}

// discardBatch records batch as discarded.
func (r *replayer) discardBatch(ctx context.Context, batch []*Letter) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("deadletter: discard: %w", err)
	}
	batch, err := r.dropRecorded(ctx, batch)
	if err != nil || len(batch) == 0 {
		return err
	}
	if err := r.checkRoom(batch); err != nil {
		return err
	}
	if err := r.record(ctx, batch); err != nil {
		return fmt.Errorf("deadletter: %d dead letters could not be recorded as discarded: %w", len(batch), err)
	}
	r.discarded = append(r.discarded, batch...)
	r.result.Discarded += len(batch)
	return nil
}

// send produces batch and records what Kafka acknowledged.
func (r *replayer) send(ctx context.Context, batch []*Letter) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("deadletter: replay: %w", err)
	}
	batch, err := r.dropRecorded(ctx, batch)
	if err != nil || len(batch) == 0 {
		return err
	}
	if err := r.checkRoom(batch); err != nil {
		return err
	}
	msgs := make([]*sarama.ProducerMessage, len(batch))
	for i, l := range batch {
		msgs[i] = r.message(l)
	}
	sendErr := r.producer.SendMessages(msgs)
	failed := failedMessages(msgs, sendErr)
	var sent []*sarama.ProducerMessage
	var letters []*Letter
	for _, m := range msgs {
		if !failed[m] {
			sent = append(sent, m)
			letters = append(letters, m.Metadata.(*Letter))
		}
	}
	err = r.record(ctx, letters)
	for _, m := range sent {
		r.sent = append(r.sent, Replayed{Letter: m.Metadata.(*Letter), ToTopic: m.Topic, ToPartition: m.Partition, ToOffset: m.Offset})
	}
	r.result.Sent += len(sent)
	if err != nil {
		return fmt.Errorf("deadletter: %d dead letters were sent but could not be recorded, so a new replay sends them again: %w", len(sent), err)
	}
	if sendErr != nil {
		return fmt.Errorf("deadletter: replay: %d of %d dead letters not sent (the others are recorded): %w", len(failed), len(msgs), sendErr)
	}
	return nil
}

// dropRecorded reads the replay group again and drops from batch what it
// now records, which another replay of the same group may have sent.
func (r *replayer) dropRecorded(ctx context.Context, batch []*Letter) ([]*Letter, error) {
	if err := r.refresh(ctx, batch); err != nil {
		return nil, err
	}
	kept := batch[:0]
	for _, l := range batch {
		if !r.resolved(l) {
			kept = append(kept, l)
		}
	}
	return kept, nil
}

// refresh merges into r.done what the replay group records for the
// partitions of batch.
func (r *replayer) refresh(ctx context.Context, batch []*Letter) error {
	var parts []int32
	for _, l := range batch {
		if !slices.Contains(parts, l.Partition) {
			parts = append(parts, l.Partition)
		}
	}
	remote, err := r.q.replay.fetch(ctx, parts)
	if err != nil {
		return err
	}
	for p, pr := range remote {
		done := r.done[p]
		done.union(pr)
		r.done[p] = done
	}
	return nil
}

// checkRoom fails before anything is sent when the replay group could not
// record batch.
func (r *replayer) checkRoom(batch []*Letter) error {
	after := map[int32]progress{}
	for _, l := range batch {
		pr, ok := after[l.Partition]
		if !ok {
			pr = r.done[l.Partition].clone()
		}
		r.mark(&pr, l)
		after[l.Partition] = pr
	}
	for p, pr := range after {
		if _, err := pr.metadata(); err != nil {
			return fmt.Errorf("deadletter: replay group %s cannot record more replays or discards of %s partition %d above offset %d, its first dead letter neither replayed nor discarded; replay or discard that one first, or use another replay group: %w",
				r.q.cfg.ReplayGroup, r.q.cfg.Topic, p, pr.next, err)
		}
	}
	return nil
}

// mark records in pr that l is sent, or discarded.
func (r *replayer) mark(pr *progress, l *Letter) {
	if r.discard {
		pr.discard(l.Offset)
	} else {
		pr.add(l.Offset)
	}
}

// record commits the progress that letters, sent or discarded, add,
// merged with what the replay group records now.
func (r *replayer) record(ctx context.Context, letters []*Letter) error {
	if len(letters) == 0 {
		return nil
	}
	// What the group records is merged in case another replay ran; the
	// commit goes ahead without it, since what was sent must be recorded.
	refreshErr := r.refresh(context.WithoutCancel(ctx), letters)
	touched := map[int32]progress{}
	for _, l := range letters {
		done := r.done[l.Partition]
		r.mark(&done, l)
		r.done[l.Partition] = done
		touched[l.Partition] = done
		l.Replayed, l.Discarded = !r.discard, r.discard
	}
	if err := r.q.replay.commit(ctx, touched); err != nil {
		return errors.Join(refreshErr, err)
	}
	return nil
}

// report calls the Progress callback with what happened since the last
// call.
func (r *replayer) report() {
	r.lastReported = r.result.Scanned
	if r.opts.Progress != nil {
		r.opts.Progress(ReplayProgress{Result: r.result, Sent: r.sent, Discarded: r.discarded, Unroutable: r.unroutable})
	}
	r.sent, r.discarded, r.unroutable = nil, nil, nil
}
