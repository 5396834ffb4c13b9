package outbox_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// TestOlderTransactionHeldOpen: a transaction that wrote into the outbox
// and stays open holds back the messages of transactions that committed
// after it started writing; once it commits, its message and all the
// others arrive, none skipped, in transaction-ID order.
func TestOlderTransactionHeldOpen(t *testing.T) {
	e := newEnv(t)
	topic := kototest.Topic(t, "held")
	r := newReader(t, e.brokers, topic)
	f := e.startForwarder(e.forwarderConfig())

	old := begin(t, e)
	publishIn(t, e, old, topic, newMsg("old", "k"))
	for i := range 10 {
		e.publish(topic, newMsg("new-"+strconv.Itoa(i), "k"))
	}
	r.none(3 * testPoll)
	if n := e.rows(); n != 10 || f.Forwarded() != 0 {
		t.Fatalf("while the old transaction is open: %d rows, %d forwarded; want 10 and 0", n, f.Forwarded())
	}
	commit(t, old)
	want := "old," + strings.Join(payloads("new", 10), ",")
	if got := payloadsOf(r.next(11)); got != want {
		t.Fatalf("Kafka order %s, want %s", got, want)
	}
	kototest.WaitFor(t, "an empty table", func() bool { return e.rows() == 0 })
}

// TestForwarderKilledMidBatch stops a produce request on the broker, kills
// the forwarder's PostgreSQL connection and cancels its context while its
// batch is on the way, then lets the batch through and starts a new
// forwarder. Everything arrives, the killed batch twice at most, and the
// first occurrences of each key are in order.
func TestForwarderKilledMidBatch(t *testing.T) {
	const batch, total = 100, 1000
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	e := newEnv(t, cluster.ListenAddrs()...)
	topic := kototest.Topic(t, "killed")
	r := newReader(t, e.brokers, topic)
	for tx := range total / 100 {
		msgs := make([]*message.Message, 100)
		for i := range msgs {
			n := tx*100 + i
			msgs[i] = newMsg(strconv.Itoa(n), "key-"+strconv.Itoa(n%5))
		}
		e.publish(topic, msgs...)
	}

	arrived, release := make(chan struct{}), make(chan struct{})
	var produces int
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if produces++; produces == 3 { // in the middle of the run
			close(arrived)
			cluster.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})

	cfg := e.forwarderConfig()
	cfg.BatchSize = batch
	cfg.ApplicationName = "koto-test-killed"
	first := e.startForwarder(cfg)
	select {
	case <-arrived:
	case <-kototest.Context(t).Done():
		t.Fatal("no third produce request")
	}
	terminate(t, e, cfg.ApplicationName)
	first.cancel()
	close(release)
	first.stop(t)
	t.Logf("killed after forwarding %d messages", first.Forwarded())

	cfg.ApplicationName = "koto-test-restarted"
	e.startForwarder(cfg)
	recs := r.distinct(total)
	kototest.WaitFor(t, "an empty table", func() bool { return e.rows() == 0 })
	recs = append(recs, r.drain(2*testPoll)...)
	dups := checkDelivery(t, recs, total)
	t.Logf("%d duplicates", dups)
	if dups == 0 || dups > batch {
		t.Fatalf("%d duplicates; want some (the killed batch went out) and at most one batch (%d)", dups, batch)
	}
}

// checkDelivery checks that recs hold the payloads 0..total-1, each at
// least once, the first occurrences of each key in increasing order, and
// returns how many are duplicates.
func checkDelivery(t *testing.T, recs []record, total int) (dups int) {
	t.Helper()
	seen := map[string]bool{}
	last := map[string]int{}
	for _, rec := range recs {
		if seen[rec.UUID] {
			dups++
			continue
		}
		seen[rec.UUID] = true
		n, err := strconv.Atoi(rec.Payload)
		if err != nil {
			t.Fatalf("record payload %q", rec.Payload)
		}
		if prev, ok := last[rec.Key]; ok && n <= prev {
			t.Fatalf("key %s: %d arrived first after %d", rec.Key, n, prev)
		}
		last[rec.Key] = n
	}
	if len(seen) != total {
		t.Fatalf("%d distinct messages arrived, want %d", len(seen), total)
	}
	return dups
}

// terminate kills the PostgreSQL backends whose application_name is app.
func terminate(t *testing.T, e *env, app string) {
	t.Helper()
	var n int
	err := e.pool.QueryRow(kototest.Context(t), "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n)
	if err != nil || n == 0 {
		t.Fatalf("terminate %s: %d backends, %v", app, n, err)
	}
}

// TestTwoForwarders: with two forwarders on one table only one is active,
// and nothing arrives twice; when the active one is stopped, the other
// takes over, and when its connection is killed, one of them carries on.
func TestTwoForwarders(t *testing.T) {
	e := newEnv(t)
	topic := kototest.Topic(t, "two")
	r := newReader(t, e.brokers, topic)
	fwd := e.forwarders(50, "koto-test-a", "koto-test-b")
	seq := &sequence{e: e, topic: topic, batch: 50}

	name := activeOf(t, fwd)
	active := fwd[name]
	seq.publish(500)
	recs := r.next(500)
	if dups := checkDelivery(t, recs, 500); dups != 0 {
		t.Fatalf("%d duplicates with two forwarders", dups)
	}
	// Forwarded counts a batch once it is recorded, after Kafka acknowledged
	// it: the reader may have the last batch first.
	kototest.WaitFor(t, "the active forwarder to record 500", func() bool { return active.Forwarded() >= 500 })
	if other := fwd[otherName(name)]; other.Forwarded() != 0 || active.Forwarded() != 500 {
		t.Fatalf("active forwarded %d, standby %d; want 500 and 0", active.Forwarded(), other.Forwarded())
	}

	active.stop(t)
	delete(fwd, name)
	survivor := fwd[activeOf(t, fwd)]
	seq.publish(500)
	recs = append(recs, r.next(500)...)
	if dups := checkDelivery(t, recs, 1000); dups != 0 {
		t.Fatalf("%d duplicates after a clean handover", dups)
	}

	survivorApp := otherName(name)
	terminate(t, e, survivorApp)
	seq.publish(500)
	recs = append(recs, r.distinct(500, recs...)...)
	if dups := checkDelivery(t, recs, 1500); dups > 50 {
		t.Fatalf("%d duplicates after a killed connection, more than a batch", dups)
	}
	if !survivor.Active() {
		kototest.WaitFor(t, "the survivor to be active again", survivor.Active)
	}
}

func otherName(name string) string {
	if name == "koto-test-a" {
		return "koto-test-b"
	}
	return "koto-test-a"
}

// TestKafkaOutage closes the broker while messages are committed: they
// stay in the table, the forwarder holds no transaction open meanwhile (a
// later commit is visible past pg_snapshot_xmin), and once the broker is
// back on its data directory they all arrive, in order.
func TestKafkaOutage(t *testing.T) {
	dir := t.TempDir()
	b, err := embedded.Start(context.Background(), embedded.WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	addr := b.Addrs()[0]
	port, _ := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	e := newEnv(t, addr)
	topic := kototest.Topic(t, "outage")
	e.publish(topic, newMsg("before", "k"))
	r := newReader(t, e.brokers, topic)
	cfg := e.forwarderConfig()
	cfg.ApplicationName = "koto-test-outage"
	cfg.Broker.Sarama = func(sc *sarama.Config) { // give up on a produce sooner
		sc.Producer.Retry.Max, sc.Producer.Retry.Backoff = 2, 20*time.Millisecond
		sc.Metadata.Retry.Max, sc.Metadata.Retry.Backoff = 1, 20*time.Millisecond
	}
	f := e.startForwarder(cfg)
	if got := payloadsOf(r.next(1)); got != "before" {
		t.Fatalf("got %s", got)
	}
	// A reader can see the record before the forwarder has its ack.
	kototest.WaitFor(t, "the forwarder to record before", func() bool { return f.Forwarded() == 1 })

	_ = b.Close()
	var want []string
	for i := range 6 {
		msgs := make([]*message.Message, 50)
		for j := range msgs {
			want = append(want, strconv.Itoa(i*50+j))
			msgs[j] = newMsg(want[len(want)-1], "k")
		}
		e.publish(topic, msgs...)
	}
	pgtest.Exec(t, e.pool, "CREATE TABLE "+e.schema+".probe (id bigserial PRIMARY KEY)")
	kototest.WaitFor(t, "a failed produce", func() bool { return e.logs.logged("Kafka") })
	notStalled(t, e)
	if n := e.rows(); n != 300 || f.Forwarded() != 1 {
		t.Fatalf("during the outage: %d rows, %d forwarded; want 300 and 1", n, f.Forwarded())
	}

	b, err = embedded.Start(context.Background(), embedded.WithDataDir(dir), embedded.WithPort(port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	restarted := time.Now()
	defer func() { t.Logf("all arrived %v after the broker restarted", time.Since(restarted)) }()
	var got []string
	seen := map[string]bool{}
	for _, rec := range r.distinct(300) {
		if !seen[rec.UUID] {
			seen[rec.UUID] = true
			got = append(got, rec.Payload)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("after the outage, first occurrences:\n%v\nwant\n%v", got, want)
	}
	kototest.WaitFor(t, "an empty table", func() bool { return e.rows() == 0 })
}

// notStalled checks, several times over a few poll intervals, that a
// transaction committed now is soon older than every running one: no
// transaction of the forwarder holds back pg_snapshot_xmin, which every
// outbox reader of the cluster waits on.
func notStalled(t *testing.T, e *env) {
	t.Helper()
	for range 5 {
		var xid uint64
		err := e.pool.QueryRow(kototest.Context(t), "INSERT INTO "+e.schema+".probe DEFAULT VALUES RETURNING pg_current_xact_id()::text::bigint").Scan(&xid)
		if err != nil {
			t.Fatal(err)
		}
		kototest.WaitFor(t, "pg_snapshot_xmin to pass a committed transaction", func() bool {
			var xmin uint64
			_ = e.pool.QueryRow(kototest.Context(t), "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint").Scan(&xmin)
			return xmin > xid
		})
		time.Sleep(testPoll)
	}
	var held int
	err := e.pool.QueryRow(kototest.Context(t), "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'koto-test-%' AND backend_xid IS NOT NULL").Scan(&held)
	if err != nil || held != 0 {
		t.Fatalf("forwarder backends with a transaction ID: %d, %v", held, err)
	}
}

// TestConnectionKilled kills the forwarder's connection, which carries its
// LISTEN: it reconnects and keeps delivering. A message written without a
// notification, by Watermill's own forwarder publisher, is forwarded by
// the poll.
func TestConnectionKilled(t *testing.T) {
	e := newEnv(t)
	topic := kototest.Topic(t, "listen")
	r := newReader(t, e.brokers, topic)
	cfg := e.forwarderConfig()
	cfg.ApplicationName = "koto-test-listen"
	f := e.startForwarder(cfg)
	e.publish(topic, newMsg("first", ""))
	r.next(1)

	terminate(t, e, cfg.ApplicationName)
	e.publish(topic, newMsg("after-kill", ""))
	if got := payloadsOf(r.next(1)); got != "after-kill" {
		t.Fatalf("got %s", got)
	}
	kototest.WaitFor(t, "the forwarder to be active again", f.Active)

	start := time.Now()
	publishWithoutNotify(t, e, topic, newMsg("silent", ""))
	if got := payloadsOf(r.next(1)); got != "silent" {
		t.Fatalf("got %s", got)
	}
	t.Logf("a message without notification arrived after %v (poll interval %v)", time.Since(start), testPoll)
}

// publishWithoutNotify commits msg through Watermill's components/forwarder
// publisher on a watermill-sql publisher, which sends no notification.
func publishWithoutNotify(t *testing.T, e *env, topic string, msg *message.Message) {
	t.Helper()
	tx := begin(t, e)
	if err := watermillPublisher(t, e, tx).Publish(topic, msg); err != nil {
		t.Fatal(err)
	}
	commit(t, tx)
}

// TestTableStaysSmall forwards 50 000 messages (5 000 with -short) while
// they are being written by four goroutines: the table never holds much
// more than what is being written, and holds nothing at the end.
func TestTableStaysSmall(t *testing.T) {
	total := 50_000
	if testing.Short() {
		total = 5_000
	}
	const perTx, workers = 100, 4
	e := newEnv(t)
	topic := kototest.Topic(t, "bounded")
	r := newReader(t, e.brokers, topic)
	cfg := e.forwarderConfig()
	f := e.startForwarder(cfg)

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for tx := w; tx < total/perTx; tx += workers {
				msgs := make([]*message.Message, perTx)
				for i := range msgs {
					n := tx*perTx + i
					msgs[i] = newMsg(strconv.Itoa(n), "key-"+strconv.Itoa(n%20))
				}
				e.publish(topic, msgs...)
			}
		})
	}
	most := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-time.After(50 * time.Millisecond):
			most = max(most, e.rows())
		}
	}
	recs := r.next(total)
	seen := map[string]bool{}
	for _, rec := range recs {
		if seen[rec.UUID] {
			t.Fatalf("%s arrived twice", rec.Payload)
		}
		seen[rec.UUID] = true
	}
	kototest.WaitFor(t, "every row deleted", func() bool { return e.rows() == 0 })
	var offsets int
	if err := e.pool.QueryRow(kototest.Context(t), fmt.Sprintf("SELECT count(*) FROM %s.outbox_offsets", e.schema)).Scan(&offsets); err != nil || offsets != 1 {
		t.Fatalf("offsets table: %d rows, %v", offsets, err)
	}
	t.Logf("%d messages forwarded; the table held at most %d rows while they were written", f.Forwarded(), most)
}

// TestRowThatIsNotAMessage: a row no Publisher wrote, which cannot be
// forwarded, is logged and skipped; the messages after it go out.
func TestRowThatIsNotAMessage(t *testing.T) {
	e := newEnv(t)
	topic := kototest.Topic(t, "garbage")
	r := newReader(t, e.brokers, topic)
	pgtest.Exec(t, e.pool, "INSERT INTO "+e.o.Table()+` (uuid, payload, metadata, transaction_id) VALUES ('garbage', '{"x": 1}', '{}', pg_current_xact_id())`)
	e.publish(topic, newMsg("after", ""))
	e.startForwarder(e.forwarderConfig())
	if got := payloadsOf(r.next(1)); got != "after" {
		t.Fatalf("got %q", got)
	}
	kototest.WaitFor(t, "an empty table", func() bool { return e.rows() == 0 })
	if !e.logs.logged("outbox row skipped") || !e.logs.logged("garbage") {
		t.Fatal("the skipped row was not logged with its uuid")
	}
}
