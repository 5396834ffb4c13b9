package kafkatest

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
	cl := client(t, brokers)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	offsets, err := kadm.NewClient(cl).FetchOffsetsForTopics(ctx, group, topic)
	if err == nil {
		err = offsets.Error()
	}
	if err != nil {
		t.Fatalf("kafkatest: offsets of group %s: %v", group, err)
	}
	var total int64
	offsets.Each(func(o kadm.OffsetResponse) {
		if o.At > 0 {
			total += o.At
		}
	})
	return total
}

// WaitCommitted polls until the offsets that group committed on topic add
// up to want, failing t after [Timeout].
func WaitCommitted(t testing.TB, brokers []string, group, topic string, want int64) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		got := Committed(t, brokers, group, topic)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafkatest: group %s committed offsets add up to %d on %s after %v, want %d", group, got, topic, Timeout, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
