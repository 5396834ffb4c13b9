package reliability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/topics"
)

// ledgerRun is one scenario's world: an embedded broker of its own, a
// schema with the idempotency store, the ledger and the outbox, and the
// input topic.
type ledgerRun struct {
	t       *testing.T
	brokers []string
	pool    *pgxpool.Pool // the test's own view of the database
	schema  string
	topic   string
	box     *outbox.Outbox
}

// newLedgerRun sets up a scenario whose input topic has partitions
// partitions.
func newLedgerRun(t *testing.T, partitions int) *ledgerRun {
	t.Helper()
	b := kototest.Embedded(t, embedded.WithPartitions(partitions))
	r := &ledgerRun{t: t, brokers: b.Addrs(), pool: pgtest.Pool(t)}
	r.schema = pgtest.Schema(t, r.pool)
	shortSessions(t, r.brokers)
	r.prepare(r.schema)
	var err error
	if r.box, err = outbox.New(r.pool, outbox.Config{Schema: r.schema}); err != nil {
		t.Fatal(err)
	}
	if err := r.box.Setup(kototest.Context(t)); err != nil {
		t.Fatal(err)
	}
	r.topic = kototest.NewTopic(t, broker.Config{Brokers: r.brokers, Provision: broker.ProvisionConfig{Partitions: int32(partitions)}}, "in")
	return r
}

// prepare creates the ledger and the idempotency store's table in schema,
// now rather than when consumers start together.
func (r *ledgerRun) prepare(schema string) {
	r.t.Helper()
	pgtest.Exec(r.t, r.pool, "CREATE TABLE "+schema+"."+ledgerTable+" (id bigserial PRIMARY KEY, message_uuid text NOT NULL)")
	store, err := postgres.NewStore(r.pool, postgres.Config{Schema: schema, CleanupInterval: -1})
	if err != nil {
		r.t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.IsProcessed(kototest.Context(r.t), "setup"); err != nil {
		r.t.Fatal(err)
	}
}

// shortSessions lets consumer groups use sessionTimeout, below the broker's
// default minimum (6 s), so that a killed member leaves its group in
// moments.
func shortSessions(t *testing.T, brokers []string) {
	t.Helper()
	v := strconv.Itoa(int(sessionTimeout.Milliseconds() / 2))
	resp, err := kototest.Admin(t, brokers).AlterBrokerConfigs(kototest.Context(t),
		[]kadm.AlterConfig{{Name: "group.min.session.timeout.ms", Value: &v}})
	if err == nil {
		for _, r := range resp {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("set group.min.session.timeout.ms: %v", err)
	}
}

// consumer returns the configuration of a consumer of group in the given
// mode; events, when not empty, is the topic of its events.
func (r *ledgerRun) consumer(t *testing.T, prefix string, transactional bool, events string) consumerConfig {
	t.Helper()
	group := kototest.Group(t, prefix)
	kototest.Provision(t, broker.Config{Brokers: r.brokers}, topics.DeadLetter(group))
	return consumerConfig{Brokers: r.brokers, Schema: r.schema, Topic: r.topic, Group: group, Transactional: transactional, Events: events}
}

// deadLetters returns how many messages the group of cfg dead-lettered.
func (r *ledgerRun) deadLetters(cfg consumerConfig) int64 {
	return kototest.Records(r.t, r.brokers, topics.DeadLetter(cfg.Group))
}

// feed publishes a stream to the input topic part by part, as the test
// releases it: a fault can then land with the rest of the stream still to
// come, however fast the consumers are.
type feed struct {
	t    *testing.T
	pub  message.Publisher
	msgs []*message.Message
	sent int // the messages published so far
	r    *ledgerRun
}

// feed returns a feed of msgs that has published nothing yet.
func (r *ledgerRun) feed(msgs []*message.Message) *feed {
	return &feed{t: r.t, pub: kototest.NewPublisher(r.t, broker.Config{Brokers: r.brokers}), msgs: msgs, r: r}
}

// to publishes the stream up to message n, in chunks, and returns once
// they are on the broker.
func (f *feed) to(n int) {
	f.t.Helper()
	const chunk = 100
	for f.sent < n {
		end := min(n, f.sent+chunk)
		if err := f.pub.Publish(f.r.topic, f.msgs[f.sent:end]...); err != nil {
			f.t.Fatalf("publish: %v", err)
		}
		f.sent = end
	}
}

// ledger returns the rows of the scenario's ledger and the distinct
// messages they hold.
func (r *ledgerRun) ledger() (rows, distinct int) { return r.ledgerIn(r.schema) }

// ledgerIn returns the rows of the ledger in schema and the distinct
// messages they hold, or -1s when the database does not answer.
func (r *ledgerRun) ledgerIn(schema string) (rows, distinct int) {
	err := r.pool.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT message_uuid) FROM "+schema+"."+ledgerTable).Scan(&rows, &distinct)
	if err != nil {
		return -1, -1
	}
	return rows, distinct
}

// waitConsumed waits until the group of cfg committed every record of the
// input topic, within limit.
func (r *ledgerRun) waitConsumed(cfg consumerConfig, records int, limit time.Duration) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	adm := kototest.Admin(r.t, r.brokers)
	for {
		if committed(ctx, adm, cfg.Group, r.topic) == int64(records) {
			return
		}
		select {
		case <-ctx.Done():
			rows, distinct := r.ledgerIn(cfg.Schema)
			r.diagnose(adm, cfg.Group)
			r.t.Fatalf("group %s committed %d of %d records within %v (ledger: %d rows, %d messages)",
				cfg.Group, committed(context.Background(), adm, cfg.Group, r.topic), records, limit, rows, distinct)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// committed is the sum of the offsets group committed on topic, or -1.
func committed(ctx context.Context, adm *kadm.Client, group, topic string) int64 {
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return -1
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			sum += o.At
		}
	})
	return sum
}

// forward runs a forwarder of the outbox until the test ends, with pool;
// logger receives its warnings.
func (r *ledgerRun) forward(pool *pgxpool.Pool, logger *slog.Logger) {
	r.t.Helper()
	box, err := outbox.New(pool, outbox.Config{Schema: r.schema})
	if err != nil {
		r.t.Fatal(err)
	}
	f, err := outbox.NewForwarder(box, outbox.ForwarderConfig{
		Broker:       broker.Config{Brokers: r.brokers},
		PollInterval: 200 * time.Millisecond,
		RetryBackoff: koto.Backoff{InitialInterval: 20 * time.Millisecond, MaxInterval: 500 * time.Millisecond},
		Logger:       logger,
	})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	r.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			r.t.Errorf("forwarder: %v", err)
		}
		_ = f.Close()
	})
}

// events collects the events that reach a topic: their UUIDs by the
// message each announces.
type events struct {
	mu      sync.Mutex
	records int
	bySrc   map[string]map[string]bool
}

// watchEvents reads topic from its start until the test ends.
func (r *ledgerRun) watchEvents(topic string) *events {
	e := &events{bySrc: map[string]map[string]bool{}}
	kototest.Watch(r.t, r.brokers, topic, func(msg *message.Message) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.records++
		src := string(msg.Payload)
		if e.bySrc[src] == nil {
			e.bySrc[src] = map[string]bool{}
		}
		e.bySrc[src][msg.UUID] = true
	})
	return e
}

// check waits until the outbox is empty and every record of topic was
// read, then checks that each of the total messages has exactly one event
// UUID. It returns the records read. While rows of the outbox wait behind
// a transaction still running elsewhere in the cluster, which the
// forwarder waits for by design (see outbox's package doc), it waits too,
// up to heldLimit.
func (e *events) check(r *ledgerRun, topic string, total int) int {
	r.t.Helper()
	start := time.Now()
	deadline := start.Add(kototest.DefaultTimeout)
	for {
		st, err := r.box.Status(context.Background())
		if err != nil {
			r.t.Fatalf("outbox status: %v", err)
		}
		onKafka := kototest.Records(r.t, r.brokers, topic)
		e.mu.Lock()
		read, messages := e.records, len(e.bySrc)
		e.mu.Unlock()
		if st.Waiting == 0 && int64(read) == onKafka && messages >= total {
			break
		}
		if st.Held > 0 {
			deadline = time.Now().Add(kototest.DefaultTimeout)
		}
		if now := time.Now(); now.After(deadline) || now.After(start.Add(heldLimit)) {
			r.t.Fatalf("after %v: %d rows left in the outbox (%d behind a running transaction; the oldest: %s), %d event records on Kafka, %d read, events of %d of %d messages",
				now.Sub(start).Round(time.Second), st.Waiting, st.Held, r.oldestTransaction(), onKafka, read, messages, total)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	extra := 0
	for src, ids := range e.bySrc {
		if len(ids) != 1 {
			extra += len(ids) - 1
			if extra <= 5 {
				r.t.Errorf("message %s has %d event UUIDs on Kafka, want 1", src, len(ids))
			}
		}
	}
	if len(e.bySrc) != total || extra != 0 {
		r.t.Errorf("events of %d messages on Kafka, %d extra event UUIDs; want %d messages, 0 extra", len(e.bySrc), extra, total)
	}
	return e.records
}

// heldLimit bounds how long [events.check] waits for the outbox while a
// transaction elsewhere in the cluster holds it back.
const heldLimit = 5 * time.Minute

// oldestTransaction describes the oldest transaction with an ID running
// in the cluster, which holds back every outbox.
func (r *ledgerRun) oldestTransaction() string {
	var db, app, state, query string
	var age float64
	err := r.pool.QueryRow(context.Background(), `SELECT coalesce(datname, ''), coalesce(application_name, ''), coalesce(state, ''),
		extract(epoch FROM now() - xact_start), left(coalesce(query, ''), 80)
		FROM pg_stat_activity WHERE backend_xid IS NOT NULL ORDER BY age(backend_xid) DESC LIMIT 1`).Scan(&db, &app, &state, &age, &query)
	if err != nil {
		return fmt.Sprintf("none (%v)", err)
	}
	return fmt.Sprintf("database %s, application %q, %s for %.0f s: %s", db, app, state, age, query)
}

// diagnose logs the state of group and of the database's sessions, for a
// scenario that did not finish.
func (r *ledgerRun) diagnose(adm *kadm.Client, group string) {
	ctx := context.Background()
	if d, err := adm.DescribeGroups(ctx, group); err == nil {
		for _, g := range d {
			r.t.Logf("group %s state %s, %d members", g.Group, g.State, len(g.Members))
			for _, m := range g.Members {
				a, _ := m.Assigned.AsConsumer()
				r.t.Logf("  member %s %s: %v", m.MemberID, m.ClientHost, a)
			}
		}
	}
	if offs, err := adm.FetchOffsets(ctx, group); err == nil {
		ends, _ := adm.ListEndOffsets(ctx, r.topic)
		offs.Each(func(o kadm.OffsetResponse) {
			end, _ := ends.Lookup(o.Topic, o.Partition)
			r.t.Logf("  partition %d: committed %d of %d", o.Partition, o.At, end.Offset)
		})
	}
	rows, err := r.pool.Query(ctx, "SELECT coalesce(application_name,''), state, coalesce(wait_event,''), left(query, 80) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	if err == nil {
		for rows.Next() {
			var app, state, wait, q string
			_ = rows.Scan(&app, &state, &wait, &q)
			r.t.Logf("  pg %s %s %s %s", app, state, wait, q)
		}
		rows.Close()
	}
}
