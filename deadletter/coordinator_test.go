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
	"github.com/koto-dev/watermill-koto/kototest"
)

// coordinatorEnv is an env on a broker of its own, whose faults reach no
// other test, with three dead letters of e.group.
func coordinatorEnv(t *testing.T) (*env, *embedded.Broker, *deadletter.Queue) {
	t.Helper()
	b := kototest.Embedded(t)
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

	res, err := q.Replay(kototest.Context(t), deadletter.Filter{}, deadletter.ReplayOptions{})
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

// TestReplayFailsOnACoordinatorFault: an error that finding the
// coordinator again does not cure ends the replay at its first answer; a
// coordinator that keeps moving is asked coordinatorAttempts (10) times;
// a commit refused as coming from no member of the group is
// ErrReplayGroupInUse. A fetch that fails sends nothing.
func TestReplayFailsOnACoordinatorFault(t *testing.T) {
	for _, tc := range []struct {
		name  string
		key   kmsg.Key
		fault *kerr.Error
		want  error
		hits  int
	}{
		{"refused", kmsg.OffsetFetch, kerr.GroupAuthorizationFailed, sarama.ErrGroupAuthorizationFailed, 1},
		{"never settles", kmsg.OffsetFetch, kerr.NotCoordinator, sarama.ErrNotCoordinatorForConsumer, 10},
		{"member group", kmsg.OffsetCommit, kerr.UnknownMemberID, deadletter.ErrReplayGroupInUse, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, b, q := coordinatorEnv(t)
			f := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{tc.key}, Group: q.ReplayGroup(), Err: tc.fault, Count: -1})
			defer f.Remove()

			_, err := q.Replay(kototest.Context(t), deadletter.Filter{}, deadletter.ReplayOptions{})
			if !errors.Is(err, tc.want) || f.Hits() != tc.hits {
				t.Fatalf("Replay = %v after %d faulted requests, want %v after %d", err, f.Hits(), tc.want, tc.hits)
			}
			if got := e.replayedUUIDs(t); tc.key == kmsg.OffsetFetch && len(got) != 0 {
				t.Fatalf("a replay whose fetch failed sent %v", got)
			}
		})
	}
}
