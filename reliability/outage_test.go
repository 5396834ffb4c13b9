package reliability

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/internal/kafkatest"
	"github.com/koto-dev/watermill-koto/internal/pgtest"
	"github.com/koto-dev/watermill-koto/internal/tcpproxy"
)

// outageLength is how long each cut of PostgreSQL lasts.
const outageLength = 5 * time.Second

// TestPostgresOutage (scenario 3): a transactional consumer with the
// outbox, a check-handle-mark consumer (another group, another schema) and
// the outbox's forwarder each reach PostgreSQL through a TCP proxy; while
// messages flow, the proxies are cut together twice for 5 s, each cut once
// the ledgers have grown since the last. Every store, handler and
// forwarder call fails meanwhile, and must be retried as an outage: nothing
// is dead-lettered, nothing is lost, the transactional ledger holds each
// message exactly once and Kafka one event UUID per message.
func TestPostgresOutage(t *testing.T) {
	r := newLedgerRun(t, 4)
	total := fullOrShort(3000, 1000) // distinct messages; a fifth come again
	events := kafkatest.Topic(t, "events")
	seen := r.watchEvents(events)

	txPool, txProxy := pgtest.ProxiedPool(t)
	chmPool, chmProxy := pgtest.ProxiedPool(t)
	fwdPool, fwdProxy := pgtest.ProxiedPool(t)
	proxies := []*tcpproxy.Proxy{txProxy, chmProxy, fwdProxy}
	restore := func() {
		for _, p := range proxies {
			p.Restore()
		}
	}
	defer restore() // should the test fail during a cut

	txCfg := r.consumer(t, "outage-tx", true, events)
	chmCfg := r.consumer(t, "outage-chm", false, "")
	chmCfg.Schema = pgtest.Schema(t, r.pool)
	r.prepare(chmCfg.Schema)
	logs := &kafkatest.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	runConsumer(t, txPool, txCfg, logger)
	runConsumer(t, chmPool, chmCfg, logger)
	fwdLogs := &kafkatest.Buffer{}
	r.forward(fwdPool, slog.New(slog.NewTextHandler(fwdLogs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	forwarderRetries := func() int { return strings.Count(fwdLogs.String(), "outbox forwarder failed; retrying") }

	msgs := withRepublished(keyedMessages("outage", total))
	pub := r.publish(msgs, 6*time.Second)
	outageRetries := func() int { return strings.Count(logs.String(), `"error_class":"outage"`) }
	for cut := range 2 {
		threshold := (cut + 1) * total / 4
		kafkatest.WaitFor(t, fmt.Sprintf("both ledgers at %d messages before cut %d", threshold, cut+1), func() bool {
			_, tx := r.ledgerIn(txCfg.Schema)
			_, chm := r.ledgerIn(chmCfg.Schema)
			return tx >= threshold && chm >= threshold
		})
		before, fwdBefore := outageRetries(), forwarderRetries()
		for _, p := range proxies {
			p.Cut()
		}
		time.Sleep(outageLength)
		restore()
		if outageRetries() == before {
			t.Errorf("cut %d: no delivery failed as an outage in %v", cut+1, outageLength)
		}
		if forwarderRetries() == fwdBefore {
			t.Errorf("cut %d: the forwarder retried nothing in %v", cut+1, outageLength)
		}
	}
	for !pub.over(t) {
		<-pub.finished
	}
	r.waitConsumed(txCfg, len(msgs), time.Minute)
	r.waitConsumed(chmCfg, len(msgs), time.Minute)

	txRows, txDistinct := r.ledgerIn(txCfg.Schema)
	chmRows, chmDistinct := r.ledgerIn(chmCfg.Schema)
	if txRows != total || txDistinct != total {
		t.Errorf("transactional ledger: %d rows of %d messages, want %d and %d", txRows, txDistinct, total, total)
	}
	if chmDistinct != total {
		t.Errorf("check-handle-mark ledger holds %d of %d messages", chmDistinct, total)
	}
	dead := r.deadLetters(txCfg) + r.deadLetters(chmCfg)
	if dead != 0 {
		t.Errorf("%d messages dead-lettered during the outages", dead)
	}
	eventRecords := seen.check(r, events, total)
	record(t, row{
		Checks:     "no dead letter; nothing lost (both modes, forwarder); transactional ledger and events exactly once",
		Faults:     fmt.Sprintf("PostgreSQL cut (TCP proxy) 2×%v", outageLength),
		Messages:   total,
		Duplicates: (txRows - txDistinct) + (chmRows - chmDistinct),
		Losses:     (total - txDistinct) + (total - chmDistinct),
		Note: fmt.Sprintf("%d records incl. duplicates; %d deliveries and %d forwarder rounds retried as outages; check-handle-mark duplicates %d; %d event records (re-sent batches included)",
			len(msgs), outageRetries(), forwarderRetries(), chmRows-chmDistinct, eventRecords),
	})
}
