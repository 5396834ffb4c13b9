package kototest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Committed returns the sum of the offsets that group committed on the
// partitions of topic; 0 when it committed none.
func Committed(t testing.TB, brokers []string, group, topic string) int64 {
	t.Helper()
	var total int64
	for _, o := range CommittedOffsets(t, brokers, group, topic) {
		if o.At > 0 {
			total += o.At
		}
	}
	return total
}

// CommittedOffsets returns the offsets group committed on topic, by
// partition, with their metadata.
func CommittedOffsets(t testing.TB, brokers []string, group, topic string) map[int32]kadm.OffsetResponse {
	t.Helper()
	cl := client(t, brokers)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	offsets, err := kadm.NewClient(cl).FetchOffsetsForTopics(ctx, group, topic)
	if err == nil {
		err = offsets.Error()
	}
	if err != nil {
		t.Fatalf("kototest: offsets of group %s: %v", group, err)
	}
	out := map[int32]kadm.OffsetResponse{}
	offsets.Each(func(o kadm.OffsetResponse) { out[o.Partition] = o })
	return out
}

// WaitCommitted polls until the offsets that group committed on topic add
// up to want, failing t once they have not moved for [DefaultTimeout].
func WaitCommitted(t testing.TB, brokers []string, group, topic string, want int64) {
	t.Helper()
	committed := func() int64 { return Committed(t, brokers, group, topic) }
	// Each look opens a client: fewer looks than WaitFor's.
	if got, ok := waitCount(committed, want, DefaultTimeout, 50*time.Millisecond); !ok || got != want {
		t.Fatalf("kototest: group %s committed offsets add up to %d on %s, want %d", group, got, topic, want)
	}
}
