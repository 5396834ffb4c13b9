package console

import (
	"context"
	"sync"
	"time"

	"github.com/koto-dev/watermill-koto/internal/offsets"
)

// newest finds when the newest dead letter of a group failed, reading
// the last record of each partition of its dead-letter topic once: a
// partition's answer holds until its end offset moves.
type newest struct {
	queues *queues
	mu     sync.Mutex
	known  map[newestKey]time.Time // by the position of a partition's last record
}

type newestKey struct {
	group     string
	partition int32
	offset    int64
}

// of returns the latest failure time of the last records of partitions.
func (n *newest) of(ctx context.Context, group string, partitions []offsets.Partition) (time.Time, error) {
	var latest time.Time
	for _, p := range partitions {
		if p.End <= p.Start {
			continue
		}
		t, err := n.last(ctx, group, p)
		if err != nil {
			return latest, err
		}
		if t.After(latest) {
			latest = t
		}
	}
	return latest, nil
}

func (n *newest) last(ctx context.Context, group string, p offsets.Partition) (time.Time, error) {
	key := newestKey{group, p.Partition, p.End - 1}
	n.mu.Lock()
	t, ok := n.known[key]
	n.mu.Unlock()
	if ok {
		return t, nil
	}
	q, err := n.queues.get(group)
	if err != nil {
		return time.Time{}, err
	}
	l, err := showLetter(ctx, q, key.partition, key.offset)
	if err != nil {
		return time.Time{}, err
	}
	t = l.FailedAtOrTimestamp()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.known == nil {
		n.known = map[newestKey]time.Time{}
	}
	for k := range n.known { // the partition's older answer is stale now
		if k.group == group && k.partition == key.partition {
			delete(n.known, k)
		}
	}
	n.known[key] = t
	return t, nil
}
