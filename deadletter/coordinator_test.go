package deadletter_test

import (
	"errors"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/deadletter"
	"github.com/koto-dev/watermill-koto/internal/kafkatest"
)

// coordinatorEnv is an env on a broker of its own, whose faults reach no
// other test, with three dead letters of e.group.
func coordinatorEnv(t *testing.T) (*env, *embedded.Broker, *deadletter.Queue) {
	t.Helper()
	b := kafkatest.Embedded(t)
	e := newEnvOn(t, b.Addrs())
	e.run(t, &consumer{bug: errBug}, e.group)
	e.publish(t, "order-placed", "a", "b", "c")
	q := e.queue(t, deadletter.Config{})
	waitForDeadLetters(t, q, 3)
	return e, b, q
}

// TestReplayWaitsForAMovingCoordinator: while the replay group's
// coordinator is not available, reading and recording the progress are
// retried, and the replay sends each dead letter once.
func TestReplayWaitsForAMovingCoordinator(t *testing.T) {
	e, b, q := coordinatorEnv(t)
	fetch := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetFetch}, Group: q.ReplayGroup(), Err: kerr.CoordinatorNotAvailable, Count: 3})
	commit := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: q.ReplayGroup(), Err: kerr.NotCoordinator, Count: 2})
	defer fetch.Remove()
	defer commit.Remove()

	res, err := q.Replay(kafkatest.Context(t), deadletter.Filter{}, deadletter.ReplayOptions{})
	if err != nil || res.Sent != 3 {
		t.Fatalf("Replay = %+v, %v; want 3 sent", res, err)
	}
	if fetch.Hits() != 3 || commit.Hits() != 2 {
		t.Fatalf("faults hit %d fetches and %d commits, want 3 and 2", fetch.Hits(), commit.Hits())
	}
	if got := e.replayedUUIDs(t); len(got) != 3 {
		t.Fatalf("replayed %v, want 3 messages once", got)
	}
}

// TestReplayStopsOnACoordinatorRefusal: an error that finding the
// coordinator again does not cure ends the replay at its first answer,
// before anything is sent.
func TestReplayStopsOnACoordinatorRefusal(t *testing.T) {
	e, b, q := coordinatorEnv(t)
	fetch := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetFetch}, Group: q.ReplayGroup(), Err: kerr.GroupAuthorizationFailed, Count: -1})
	defer fetch.Remove()

	_, err := q.Replay(kafkatest.Context(t), deadletter.Filter{}, deadletter.ReplayOptions{})
	if !errors.Is(err, sarama.ErrGroupAuthorizationFailed) {
		t.Fatalf("Replay = %v, want the group authorization error", err)
	}
	if fetch.Hits() != 1 {
		t.Fatalf("the refused fetch was sent %d times, want once", fetch.Hits())
	}
	if got := e.replayedUUIDs(t); len(got) != 0 {
		t.Fatalf("a refused replay sent %v", got)
	}
}

// TestReplayGivesUpOnACoordinatorThatNeverSettles: a coordinator that
// keeps moving is asked coordinatorAttempts (10) times, and the replay
// fails with its error.
func TestReplayGivesUpOnACoordinatorThatNeverSettles(t *testing.T) {
	_, b, q := coordinatorEnv(t)
	fetch := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetFetch}, Group: q.ReplayGroup(), Err: kerr.NotCoordinator, Count: -1})
	defer fetch.Remove()

	_, err := q.Replay(kafkatest.Context(t), deadletter.Filter{}, deadletter.ReplayOptions{})
	if !errors.Is(err, sarama.ErrNotCoordinatorForConsumer) {
		t.Fatalf("Replay = %v, want the coordinator's error", err)
	}
	if fetch.Hits() != 10 {
		t.Fatalf("the fetch was sent %d times, want 10", fetch.Hits())
	}
}

// TestReplayCommitOfAMemberGroupIsInUse: a commit that the coordinator
// refuses as coming from no member of a group that has members ends the
// replay with ErrReplayGroupInUse.
func TestReplayCommitOfAMemberGroupIsInUse(t *testing.T) {
	_, b, q := coordinatorEnv(t)
	commit := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: q.ReplayGroup(), Err: kerr.UnknownMemberID, Count: -1})
	defer commit.Remove()

	_, err := q.Replay(kafkatest.Context(t), deadletter.Filter{}, deadletter.ReplayOptions{})
	if !errors.Is(err, deadletter.ErrReplayGroupInUse) || commit.Hits() != 1 {
		t.Fatalf("Replay = %v after %d commits, want ErrReplayGroupInUse after one", err, commit.Hits())
	}
}
