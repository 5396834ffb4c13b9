package deadletter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// tailGapWait is how long a scan waits for a record below a partition's
// end when none comes. Offsets with no record (transaction markers of a
// transactional producer, compaction) are skipped by the consumer without a
// word; when they are the last offsets of a partition, this wait is what
// ends the partition. The middleware's dead letters never leave such gaps.
const tailGapWait = 10 * time.Second

// partitionRange is the part of one partition a scan reads: start..end-1.
type partitionRange struct {
	partition  int32
	start, end int64
}

// partitionRanges are the ranges of every partition of the topic, in
// partition order.
type partitionRanges []partitionRange

func (rs partitionRanges) partitions() []int32 {
	ps := make([]int32, len(rs))
	for i, r := range rs {
		ps[i] = r.partition
	}
	return ps
}

func (rs partitionRanges) of(partition int32) (partitionRange, bool) {
	for _, r := range rs {
		if r.partition == partition {
			return r, true
		}
	}
	return partitionRange{}, false
}

// records is how many offsets the ranges span.
func (rs partitionRanges) records() int64 {
	var n int64
	for _, r := range rs {
		n += max(r.end-r.start, 0)
	}
	return n
}

// upTo returns rs ending at ends where those are lower, and empty for a
// partition that ends lacks; nil ends change nothing.
func (rs partitionRanges) upTo(ends map[int32]int64) partitionRanges {
	if ends == nil {
		return rs
	}
	out := slices.Clone(rs)
	for i, r := range out {
		end, ok := ends[r.partition]
		if !ok {
			end = r.start
		}
		out[i].end = min(r.end, end)
	}
	return out
}

func (rs partitionRanges) String() string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("partition %d: offsets %d..%d", r.partition, r.start, r.end-1)
		if r.end <= r.start {
			parts[i] = fmt.Sprintf("partition %d: nothing", r.partition)
		}
	}
	return strings.Join(parts, ", ")
}

// ranges returns, for every partition of the topic, what it holds now:
// from its oldest offset to its end. Records produced later are not part
// of it, so that a scan ends and a replay does not replay its own
// failures.
func (q *Queue) ranges(ctx context.Context) (partitionRanges, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("deadletter: %w", err)
	}
	topic := q.cfg.Topic
	if err := q.client.RefreshMetadata(topic); err != nil {
		if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			return nil, fmt.Errorf("%w %s", ErrNoTopic, topic)
		}
		return nil, fmt.Errorf("deadletter: dead-letter topic %s: %w", topic, err)
	}
	partitions, err := q.client.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("deadletter: partitions of %s: %w", topic, err)
	}
	rs := make(partitionRanges, 0, len(partitions))
	for _, p := range partitions {
		oldest, err := q.client.GetOffset(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("deadletter: oldest offset of %s partition %d: %w", topic, p, err)
		}
		end, err := q.client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, fmt.Errorf("deadletter: end offset of %s partition %d: %w", topic, p, err)
		}
		rs = append(rs, partitionRange{partition: p, start: oldest, end: end})
	}
	return rs, nil
}

// scan reads every range in order and calls fn with each dead letter
// until fn returns false or an error, or ctx ends. Every partition starts
// fetching at once, so that their start and stop overlap.
func (q *Queue) scan(ctx context.Context, rs partitionRanges, fn func(*Letter) (bool, error)) (err error) {
	q.scanning.Lock()
	defer q.scanning.Unlock()
	pcs := make([]sarama.PartitionConsumer, len(rs))
	defer func() {
		if cerr := closeAll(pcs); cerr != nil && err == nil {
			err = fmt.Errorf("deadletter: read %s: %w", q.cfg.Topic, cerr)
		}
	}()
	for i, r := range rs {
		if r.start >= r.end {
			continue
		}
		if pcs[i], err = q.consumer.ConsumePartition(q.cfg.Topic, r.partition, r.start); err != nil {
			return fmt.Errorf("deadletter: read %s partition %d from offset %d: %w", q.cfg.Topic, r.partition, r.start, err)
		}
	}
	for i, r := range rs {
		if pcs[i] == nil {
			continue
		}
		if more, err := q.scanPartition(ctx, pcs[i], r, fn); err != nil || !more {
			return err
		}
	}
	return nil
}

// scanPartition reads one partition consumer up to the end of r.
func (q *Queue) scanPartition(ctx context.Context, pc sarama.PartitionConsumer, r partitionRange, fn func(*Letter) (bool, error)) (more bool, err error) {
	gap := time.NewTimer(tailGapWait)
	defer gap.Stop()
	for {
		select {
		case rec := <-pc.Messages():
			if rec.Offset >= r.end {
				return true, nil
			}
			if more, err := fn(newLetter(rec, q.reader)); err != nil || !more {
				return false, err
			}
			if rec.Offset >= r.end-1 {
				return true, nil
			}
			gap.Reset(tailGapWait)
		case cerr := <-pc.Errors():
			return false, fmt.Errorf("deadletter: %w", cerr)
		case <-gap.C:
			return true, nil
		case <-ctx.Done():
			return false, fmt.Errorf("deadletter: read %s partition %d: %w", q.cfg.Topic, r.partition, ctx.Err())
		}
	}
}

// closeAll stops every partition consumer, then waits for each.
func closeAll(pcs []sarama.PartitionConsumer) error {
	for _, pc := range pcs {
		if pc != nil {
			pc.AsyncClose()
		}
	}
	var errs []error
	for _, pc := range pcs {
		if pc != nil {
			errs = append(errs, pc.Close())
		}
	}
	return errors.Join(errs...)
}
