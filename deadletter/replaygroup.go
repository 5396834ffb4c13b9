package deadletter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/koto-dev/watermill-koto/internal/retry"
)

// coordinatorAttempts and coordinatorBackoff bound how long a fetch or a
// commit of the replay group waits for its coordinator to move or load.
const (
	coordinatorAttempts = 10
	coordinatorBackoff  = 200 * time.Millisecond
)

// replayGroup reads and commits a replay group's progress on the
// dead-letter topic without joining the group: offset commits with no
// generation, as Kafka's own tools make for a group without members.
type replayGroup struct {
	client       sarama.Client
	group, topic string
}

// fetch returns the progress recorded for partitions.
func (g replayGroup) fetch(ctx context.Context, partitions []int32) (map[int32]progress, error) {
	var resp *sarama.OffsetFetchResponse
	err := g.withCoordinator(ctx, "read", func(b *sarama.Broker) (sarama.KError, error) {
		req := sarama.NewOffsetFetchRequest(g.client.Config().Version, g.group, map[string][]int32{g.topic: partitions})
		r, err := b.FetchOffset(req)
		if err != nil {
			return sarama.ErrNoError, err
		}
		if r.Err == sarama.ErrGroupIDNotFound { // some brokers say so of a group that never committed
			r = &sarama.OffsetFetchResponse{}
		}
		if r.Err != sarama.ErrNoError {
			return r.Err, nil
		}
		for _, p := range partitions {
			if block := r.GetBlock(g.topic, p); block != nil && block.Err != sarama.ErrNoError {
				return block.Err, nil
			}
		}
		resp = r
		return sarama.ErrNoError, nil
	})
	if err != nil {
		return nil, err
	}
	out := make(map[int32]progress, len(partitions))
	for _, p := range partitions {
		offset, metadata := int64(-1), ""
		if block := resp.GetBlock(g.topic, p); block != nil {
			offset, metadata = block.Offset, block.Metadata
		}
		pr, err := parseProgress(offset, metadata)
		if err != nil {
			return nil, fmt.Errorf("deadletter: replay group %s, partition %d of %s: %w; use another replay group", g.group, p, g.topic, err)
		}
		out[p] = pr
	}
	return out, nil
}

// ErrReplayGroupInUse means the replay group has members: something
// consumes in it, and its commits would overwrite what replays record.
// Stop it, or use another replay group.
var ErrReplayGroupInUse = errors.New("deadletter: the replay group has members")

// checkUnused fails with ErrReplayGroupInUse when the group has members,
// before a replay sends anything that it could then not record.
func (g replayGroup) checkUnused(ctx context.Context) error {
	var members int
	err := g.withCoordinator(ctx, "describe", func(b *sarama.Broker) (sarama.KError, error) {
		req := &sarama.DescribeGroupsRequest{Groups: []string{g.group}}
		if g.client.Config().Version.IsAtLeast(sarama.V2_4_0_0) {
			req.Version = 5
		}
		r, err := b.DescribeGroups(req)
		if err != nil {
			return sarama.ErrNoError, err
		}
		for _, gd := range r.Groups {
			if gd.Err != sarama.ErrNoError && gd.Err != sarama.ErrGroupIDNotFound {
				return gd.Err, nil
			}
			members += len(gd.Members)
		}
		return sarama.ErrNoError, nil
	})
	if err != nil {
		return err
	}
	if members > 0 {
		return fmt.Errorf("%w: %s has %d, which would overwrite what replays record; stop them, or use another replay group", ErrReplayGroupInUse, g.group, members)
	}
	return nil
}

// commit records progress. It runs to the end even when ctx is cancelled:
// it follows a produce, and what was sent must be recorded.
func (g replayGroup) commit(ctx context.Context, ps map[int32]progress) error {
	req := sarama.NewOffsetCommitRequest(g.client.Config(), g.group)
	for p, pr := range ps {
		md, err := pr.metadata()
		if err != nil {
			return fmt.Errorf("deadletter: replay group %s, partition %d of %s above offset %d: %w", g.group, p, g.topic, pr.next, err)
		}
		req.AddBlockWithLeaderEpoch(g.topic, p, pr.next, -1, 0, md)
	}
	return g.withCoordinator(context.WithoutCancel(ctx), "commit", func(b *sarama.Broker) (sarama.KError, error) {
		r, err := b.CommitOffset(req)
		if err != nil {
			return sarama.ErrNoError, err
		}
		for _, errs := range r.Errors {
			for _, kerr := range errs {
				if kerr != sarama.ErrNoError {
					return kerr, nil
				}
			}
		}
		return sarama.ErrNoError, nil
	})
}

// withCoordinator runs req against the group's coordinator, finding it
// again and retrying while it moves, loads or cannot be reached.
func (g replayGroup) withCoordinator(ctx context.Context, doing string, req func(*sarama.Broker) (sarama.KError, error)) error {
	op := func() error {
		b, err := g.client.Coordinator(g.group)
		if err != nil {
			return err
		}
		kerr, err := req(b)
		if err == nil && kerr != sarama.ErrNoError {
			err = kerr
		}
		return err
	}
	next := func(f retry.Failure) error {
		var kerr sarama.KError
		if f.Retry >= coordinatorAttempts || errors.As(f.Err, &kerr) && !coordinatorMoved(kerr) {
			return g.failed(doing, f.Err)
		}
		_ = g.client.RefreshCoordinator(g.group)
		return nil
	}
	interrupted := func(last error) error {
		return fmt.Errorf("deadletter: %s replay group %s: %w (last error: %v)", doing, g.group, ctx.Err(), last)
	}
	return retry.Do(ctx, func(int) time.Duration { return coordinatorBackoff }, op, next, interrupted)
}

// failed is the error of a request to the coordinator that failed with err
// for good.
func (g replayGroup) failed(doing string, err error) error {
	var kerr sarama.KError
	if errors.As(err, &kerr) && (kerr == sarama.ErrUnknownMemberId || kerr == sarama.ErrIllegalGeneration) {
		return fmt.Errorf("%w: %s replay group %s: %w", ErrReplayGroupInUse, doing, g.group, err)
	}
	return fmt.Errorf("deadletter: %s replay group %s: %w", doing, g.group, err)
}

// coordinatorMoved reports the errors that finding the coordinator again,
// or waiting for it, cures.
func coordinatorMoved(kerr sarama.KError) bool {
	switch kerr {
	case sarama.ErrNotCoordinatorForConsumer, sarama.ErrConsumerCoordinatorNotAvailable,
		sarama.ErrOffsetsLoadInProgress, sarama.ErrRequestTimedOut, sarama.ErrNetworkException:
		return true
	}
	return false
}
