package deadletter_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/koto-dev/watermill-koto/deadletter"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

// TestNoTopic: on a broker that creates the topics clients ask about, a
// queue whose dead-letter topic does not exist fails each read with
// ErrNoTopic and leaves the topic uncreated; Groups lists the group that
// has one.
func TestNoTopic(t *testing.T) {
	e := newEnv(t) // provisions e.group's dead-letter topic
	missing := kototest.Group(t, "no.such-consumer")
	q := e.queue(t, deadletter.Config{ConsumerGroup: missing})
	ctx := kototest.Context(t)

	_, err := q.List(ctx, deadletter.Filter{})
	if !errors.Is(err, deadletter.ErrNoTopic) {
		t.Errorf("List: %v, want ErrNoTopic", err)
	}
	if _, err := q.Show(ctx, 0, 0); !errors.Is(err, deadletter.ErrNoTopic) {
		t.Errorf("Show: %v, want ErrNoTopic", err)
	}
	if _, err := q.Replay(ctx, deadletter.Filter{}, deadletter.ReplayOptions{}); !errors.Is(err, deadletter.ErrNoTopic) {
		t.Errorf("Replay: %v, want ErrNoTopic", err)
	}
	if kototest.TopicExists(t, e.brokers, topics.DeadLetter(missing)) {
		t.Errorf("reading created %s", topics.DeadLetter(missing))
	}

	groups, err := deadletter.Groups(ctx, e.brokerConfig())
	if err != nil {
		t.Fatalf("Groups: %v", err)
	}
	if !slices.Contains(groups, e.group) || slices.Contains(groups, missing) {
		t.Errorf("Groups = %q, want %s and not %s", groups, e.group, missing)
	}
}
