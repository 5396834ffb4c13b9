package outbox_test

import (
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/kototest"
)

// TestStandbyTakesOverFromAKilledForwarder: of two forwarders, the active
// one dies (its connection terminated and its context cancelled, as when
// its process is killed) while the broker holds the produce request of one
// of its batches, with more rows still to forward: the standby takes over
// and delivers the rest, the killed batch again (at most one batch of
// duplicates, and some), with the first occurrences in order.
func TestStandbyTakesOverFromAKilledForwarder(t *testing.T) {
	const batch = 50
	b := kototest.Embedded(t)
	e := newEnv(t, b.Addrs()...)
	topic := kototest.Topic(t, "takeover")
	r := newReader(t, e.brokers, topic)
	fwd := e.forwarders(batch, "koto-test-takeover-a", "koto-test-takeover-b")
	publish := (&sequence{e: e, topic: topic, batch: batch}).publish

	activeApp := activeOf(t, fwd)
	publish(500)
	recs := r.next(500)
	if dups := checkDelivery(t, recs, 500); dups != 0 {
		t.Fatalf("%d duplicates before the kill", dups)
	}

	// The broker holds the next produce request until the kill is over.
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	cluster := b.Cluster()
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		once.Do(func() {
			close(arrived)
			cluster.SleepControl(func() { <-release })
		})
		return nil, nil, false
	})
	killed := fwd[activeApp]
	delete(fwd, activeApp)
	var standby *running
	for _, f := range fwd {
		standby = f
	}
	publish(500)
	select {
	case <-arrived:
	case <-kototest.Context(t).Done():
		t.Fatal("no produce request of the active forwarder")
	}
	terminate(t, e, activeApp)
	killed.cancel()
	close(release)
	killed.stop(t)
	kototest.WaitFor(t, "the standby to take over", standby.Active)
	publish(500)
	recs = append(recs, r.distinct(1000, recs...)...)
	kototest.WaitFor(t, "an empty table", func() bool { return e.rows() == 0 })
	recs = append(recs, r.drain(2*testPoll)...)
	dups := checkDelivery(t, recs, 1500)
	if dups == 0 || dups > batch || standby.Forwarded() == 0 {
		t.Fatalf("%d duplicates (want some: the killed batch went out; at most %d), the standby forwarded %d", dups, batch, standby.Forwarded())
	}
	t.Logf("the killed forwarder sent %d, the standby %d, %d duplicates", killed.Forwarded(), standby.Forwarded(), dups)
}
