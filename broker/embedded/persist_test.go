package embedded_test

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestRestartKeepsRecordsAndGroupOffsets consumes the first batch with a
// group, restarts the broker on the same data directory and port, and checks
// that a new subscriber in the same group gets exactly the records produced
// after its commit. Records go round-robin over all partitions, so a lost
// offset on any partition would deliver an old record first.
func TestRestartKeepsRecordsAndGroupOffsets(t *testing.T) {
	dir := t.TempDir()
	const topic, group = "persisted", "persisted-group"
	first := kototest.Embedded(t, embedded.WithDataDir(dir), embedded.WithTopics(topic))
	addrs := first.Addrs()
	old := values("old", 12)
	produceValues(t, addrs, topic, old...)
	if got := receiveAcked(t, addrs, group, topic, len(old), int64(len(old))); !sameSet(got, old) {
		t.Fatalf("before restart received %v, want %v", got, old)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	second := kototest.Embedded(t, embedded.WithDataDir(dir), embedded.WithPort(portOf(t, addrs[0])), embedded.WithTopics(topic, "added-after-restart"))
	addrs = second.Addrs()
	if total := kototest.Committed(t, addrs, group, topic); total != int64(len(old)) {
		t.Fatalf("after restart the group's committed offsets add up to %d, want %d", total, len(old))
	}
	assertRecordCount(t, addrs, topic, int64(len(old)))
	assertTopicExists(t, addrs, "added-after-restart")

	fresh := values("new", 6)
	produceValues(t, addrs, topic, fresh...)
	if got := receiveAcked(t, addrs, group, topic, len(fresh), int64(len(old)+len(fresh))); !sameSet(got, fresh) {
		t.Fatalf("after restart received %v, want only the new records %v", got, fresh)
	}
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("split %q: %v", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("port of %q: %v", addr, err)
	}
	return port
}

// assertRecordCount checks the sum of the topic's end offsets.
func assertRecordCount(t *testing.T, addrs []string, topic string, want int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
	defer cancel()
	ends, err := kototest.Admin(t, addrs).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListEndOffsets(%s): %v", topic, err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != want {
		t.Fatalf("topic %s holds %d records, want %d", topic, total, want)
	}
}

func assertTopicExists(t *testing.T, addrs []string, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
	defer cancel()
	details, err := kototest.Admin(t, addrs).ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("ListTopics(%s): %v", topic, err)
	}
	if d, ok := details[topic]; !ok || d.Err != nil {
		t.Fatalf("topic %s does not exist after restart: %v", topic, d.Err)
	}
}
