package deadletter_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/deadletter"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestListWhileKafkaHangs: when no fetch of the dead-letter topic is
// answered, List fails instead of returning an empty list as if the topic
// held nothing, and Replay fails instead of reporting that it scanned
// everything.
func TestListWhileKafkaHangs(t *testing.T) {
	b := kototest.Embedded(t)
	e := newEnvOn(t, b.Addrs())
	if err := e.pub.Publish(e.dlq, message.NewMessage("dead-1", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	q := e.queue(t, deadletter.Config{})
	// Every fetch of the topic is left unanswered, as by a broker that
	// hangs; the metadata and offset requests are answered.
	stall := kototest.StallRequests(t, b, kmsg.Fetch, e.dlq)
	letters, err := q.List(kototest.Context(t), deadletter.Filter{})
	if err == nil {
		t.Fatalf("List while Kafka hangs = %d dead letters and no error, want an error", len(letters))
	}
	res, err := q.Replay(kototest.Context(t), deadletter.Filter{}, deadletter.ReplayOptions{})
	if err == nil || res.Scanned != 0 || res.Sent != 0 {
		t.Fatalf("Replay while Kafka hangs = %+v, %v; want an error, nothing scanned", res, err)
	}
	if stall.Count() == 0 {
		t.Error("no fetch was left unanswered: the test did not make Kafka hang")
	}
}
