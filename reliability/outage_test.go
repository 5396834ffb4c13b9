package reliability

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// cuts is how many times TestPostgresOutage cuts PostgreSQL.
const cuts = 2

// TestPostgresOutage (scenario 3): a transactional consumer with the
// outbox, a check-handle-mark consumer (another group, another schema) and
// the outbox's forwarder each reach PostgreSQL through a TCP proxy. The
// stream goes out in three parts; twice, once both consumers hold a
// delivery of the part out after its effect (in the transactional mode,
// with its transaction open), the proxies are cut together and the next
// part goes out. A cut lasts until each consumer has retried a delivery as
// an outage beyond its MaxAttempts and the forwarder has retried: every
// store, handler and forwarder call fails meanwhile, and must be retried
// as an outage: nothing is dead-lettered, nothing is lost, the
// transactional ledger holds each message exactly once and Kafka one
// event UUID per message.
func TestPostgresOutage(t *testing.T) {
	r := newLedgerRun(t, 4)
	total := fullOrShort(3000, 1000) // distinct messages; a fifth come again
	events := kototest.Topic(t, "events")
	seen := r.watchEvents(events)

	txPool, txProxy := pgtest.ProxiedPool(t)
	chmPool, chmProxy := pgtest.ProxiedPool(t)
	fwdPool, fwdProxy := pgtest.ProxiedPool(t)
	proxies := []*pgtest.Proxy{txProxy, chmProxy, fwdProxy}
	restore := func() {
		for _, p := range proxies {
			p.Restore()
		}
	}
	defer restore() // should the test fail during a cut

	h := newTestHolds(t)
	txCfg := r.consumer(t, "outage-tx", true, events)
	chmCfg := r.consumer(t, "outage-chm", false, "")
	chmCfg.Schema = pgtest.Schema(t, r.pool)
	r.prepare(chmCfg.Schema)
	txCfg.Name, chmCfg.Name = "transactional", "check-handle-mark"
	txLogs, chmLogs := &kototest.Buffer{}, &kototest.Buffer{}
	runConsumer(t, txPool, txCfg, h, nil, slog.New(slog.NewJSONHandler(txLogs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	runConsumer(t, chmPool, chmCfg, h, nil, slog.New(slog.NewJSONHandler(chmLogs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	fwdLogs := &kototest.Buffer{}
	r.forward(fwdPool, slog.New(slog.NewTextHandler(fwdLogs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	forwarderRetries := func() int { return strings.Count(fwdLogs.String(), "outbox forwarder failed; retrying") }

	msgs := withRepublished(keyedMessages("outage", total))
	parts := streamParts(len(msgs), cuts+1)
	markHolds(msgs, parts, cuts)
	stream := r.feed(msgs)
	stream.to(parts[1])
	var lengths []string
	for cut := range cuts {
		h.waitHeld(t, cut, txCfg.Name, chmCfg.Name)
		txFrom, chmFrom, fwdFrom := len(txLogs.String()), len(chmLogs.String()), forwarderRetries()
		for _, p := range proxies {
			p.Cut()
		}
		start := time.Now()
		stream.to(parts[cut+2])
		h.openTo(cut + 1)
		kototest.WaitFor(t, fmt.Sprintf("cut %d: each consumer to retry a delivery as an outage beyond attempt %d, and the forwarder to retry", cut+1, maxAttempts), func() bool {
			tx, chm := txLogs.String()[txFrom:], chmLogs.String()[chmFrom:]
			for _, logs := range []string{tx, chm} {
				if line := deadLettered(logs); line != "" {
					t.Fatalf("cut %d: a delivery was dead-lettered: %s", cut+1, line)
				}
			}
			return outageBeyond(tx, maxAttempts) && outageBeyond(chm, maxAttempts) && forwarderRetries() > fwdFrom
		})
		restore()
		lengths = append(lengths, time.Since(start).Round(time.Millisecond).String())
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
	outageRetries := strings.Count(txLogs.String()+chmLogs.String(), `"error_class":"outage"`)
	record(t, row{
		Checks:     "no dead letter; nothing lost (both modes, forwarder); transactional ledger and events exactly once",
		Faults:     fmt.Sprintf("PostgreSQL cut (TCP proxy) %d×, each with a delivery held in each consumer and until each retried one beyond MaxAttempts", cuts),
		Messages:   total,
		Duplicates: (txRows - txDistinct) + (chmRows - chmDistinct),
		Losses:     (total - txDistinct) + (total - chmDistinct),
		Note: fmt.Sprintf("%d records incl. duplicates; cuts of %s; %d deliveries and %d forwarder rounds retried as outages; check-handle-mark duplicates %d; %d event records (re-sent batches included)",
			len(msgs), strings.Join(lengths, " and "), outageRetries, forwarderRetries(), chmRows-chmDistinct, eventRecords),
	})
}

// deadLettered returns the first line of logs, the JSON lines of a
// consumer, that says a delivery was dead-lettered, or "".
func deadLettered(logs string) string {
	for line := range strings.Lines(logs) {
		if strings.Contains(line, `"outcome":"dead-lettered"`) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// outageBeyond reports whether logs, the JSON lines of a consumer, hold a
// retry of a delivery as an outage after its attempt n or a later one.
func outageBeyond(logs string, n int) bool {
	for line := range strings.Lines(logs) {
		var l struct {
			Class    string `json:"error_class"`
			Attempts int    `json:"attempts"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Class == koto.ClassOutage.String() && l.Attempts > n {
			return true
		}
	}
	return false
}
