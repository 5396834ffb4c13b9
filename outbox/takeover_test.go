package outbox_test

import (
	"testing"

	"github.com/koto-dev/watermill-koto/internal/kafkatest"
)

// TestStandbyTakesOverFromAKilledForwarder: of two forwarders, the active
// one dies (its connection terminated and its context cancelled, as when
// its process is killed): the standby takes over and delivers the rest,
// with at most one batch again and the first occurrences in order.
func TestStandbyTakesOverFromAKilledForwarder(t *testing.T) {
	const batch = 50
	e := newEnv(t)
	topic := kafkatest.Topic(t, "takeover")
	r := newReader(t, e.brokers, topic)
	fwd := e.forwarders(batch, "koto-test-takeover-a", "koto-test-takeover-b")
	publish := (&sequence{e: e, topic: topic, batch: batch}).publish

	activeApp := activeOf(t, fwd)
	publish(500)
	recs := r.next(500)
	if dups := checkDelivery(t, recs, 500); dups != 0 {
		t.Fatalf("%d duplicates before the kill", dups)
	}

	killed := fwd[activeApp]
	delete(fwd, activeApp)
	var standby *running
	for _, f := range fwd {
		standby = f
	}
	publish(500) // some may go out before the kill
	terminate(t, e, activeApp)
	killed.cancel()
	killed.stop(t)
	kafkatest.WaitFor(t, "the standby to take over", standby.Active)
	publish(500)
	recs = append(recs, r.distinct(1000, recs...)...)
	kafkatest.WaitFor(t, "an empty table", func() bool { return e.rows() == 0 })
	recs = append(recs, r.drain(2*testPoll)...)
	dups := checkDelivery(t, recs, 1500)
	if dups > batch || standby.Forwarded() == 0 {
		t.Fatalf("%d duplicates (at most %d), the standby forwarded %d", dups, batch, standby.Forwarded())
	}
	t.Logf("the killed forwarder sent %d, the standby %d, %d duplicates", killed.Forwarded(), standby.Forwarded(), dups)
}
