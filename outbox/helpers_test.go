package outbox_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
)

// testPoll is the forwarder's poll interval in tests: short, so that the
// tests that rely on it finish quickly.
const testPoll = 200 * time.Millisecond

// env is one test's outbox: a table in a schema of its own, a pool, and
// Kafka brokers.
type env struct {
	t       *testing.T
	logger  *slog.Logger
	logs    *testWriter
	pool    *pgxpool.Pool
	schema  string
	o       *outbox.Outbox
	brokers []string
}

// newEnv makes an outbox in a fresh schema, set up, on an embedded broker
// of its own unless brokers are given.
func newEnv(t *testing.T, brokers ...string) *env {
	t.Helper()
	cfg := pgtest.Config(t)
	cfg.MaxConns = 12
	pool := pgtest.PoolWith(t, cfg)
	schema := pgtest.Schema(t, pool)
	o, err := outbox.New(pool, outbox.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Setup(kototest.Context(t)); err != nil {
		t.Fatal(err)
	}
	if len(brokers) == 0 {
		brokers = kototest.Brokers(t)
	}
	logger, logs := testLogger(t)
	return &env{t: t, logger: logger, logs: logs, pool: pool, schema: schema, o: o, brokers: brokers}
}

// newStore is an idempotency store in e's schema, on e's pool, without
// background cleanup, closed when the test ends.
func newStore(t *testing.T, e *env) *postgres.Store {
	t.Helper()
	store, err := postgres.NewStore(e.pool, postgres.Config{Schema: e.schema, CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// forwarderConfig is the tests' forwarder configuration.
func (e *env) forwarderConfig() outbox.ForwarderConfig {
	return outbox.ForwarderConfig{
		Broker:           broker.Config{Brokers: e.brokers},
		PollInterval:     testPoll,
		TakeoverInterval: 100 * time.Millisecond,
		RetryBackoff:     koto.Backoff{InitialInterval: 20 * time.Millisecond, MaxInterval: 200 * time.Millisecond},
		Logger:           e.logger,
	}
}

// running is a forwarder whose Run goroutine the test owns.
type running struct {
	*outbox.Forwarder
	cancel context.CancelFunc
	done   chan error
}

// stop cancels Run and waits for it; Run must return nil.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Errorf("Run returned %v", err)
	}
	r.done <- nil // for the cleanup
}

// startForwarder runs a forwarder with cfg until the test ends or stop.
func (e *env) startForwarder(cfg outbox.ForwarderConfig) *running {
	e.t.Helper()
	f, err := outbox.NewForwarder(e.o, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	r := &running{Forwarder: f, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- f.Run(rctx) }()
	e.t.Cleanup(func() {
		_ = f.Close()
		cancel()
		if err := <-r.done; err != nil {
			e.t.Errorf("Run returned %v", err)
		}
	})
	return r
}

// forwarders starts one forwarder per application name, each reading
// batch rows at a time, until the test ends.
func (e *env) forwarders(batch int, apps ...string) map[string]*running {
	e.t.Helper()
	fwd := map[string]*running{}
	for _, app := range apps {
		cfg := e.forwarderConfig()
		cfg.ApplicationName, cfg.BatchSize = app, batch
		fwd[app] = e.startForwarder(cfg)
	}
	return fwd
}

// activeOf waits until exactly one of fwd is active and returns its name.
func activeOf(t *testing.T, fwd map[string]*running) string {
	t.Helper()
	var name string
	kototest.WaitFor(t, "exactly one active forwarder", func() bool {
		n := 0
		for k, f := range fwd {
			if f.Active() {
				name, n = k, n+1
			}
		}
		return n == 1
	})
	return name
}

// sequence publishes messages numbered from 0 on seven partition keys,
// batch of them a transaction.
type sequence struct {
	e     *env
	topic string
	batch int
	next  int
}

// publish publishes the next n messages.
func (s *sequence) publish(n int) {
	s.e.t.Helper()
	for range n / s.batch {
		msgs := make([]*message.Message, s.batch)
		for i := range msgs {
			msgs[i] = newMsg(strconv.Itoa(s.next), "key-"+strconv.Itoa(s.next%7))
			s.next++
		}
		s.e.publish(s.topic, msgs...)
	}
}

// publish commits one transaction that publishes msgs to topic.
func (e *env) publish(topic string, msgs ...*message.Message) {
	e.t.Helper()
	err := e.o.Transact(kototest.Context(e.t), func(ctx context.Context, tx pgx.Tx) error {
		return e.o.Publisher(tx).Publish(topic, msgs...)
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// rows counts the rows in the outbox table.
func (e *env) rows() int {
	e.t.Helper()
	return int(pgtest.QueryInt(e.t, e.pool, "SELECT count(*) FROM "+e.o.Table()))
}

// newMsg is a message with a UUIDv7, the payload and, if key is not empty,
// that partition key.
func newMsg(payload, key string) *message.Message {
	msg := message.NewMessage(uuid.Must(uuid.NewV7()).String(), []byte(payload))
	if key != "" {
		msg.Metadata.Set(koto.PartitionKeyMetadataKey, key)
	}
	return msg
}

// record is a Kafka record as a test looks at it.
type record struct {
	UUID      string
	Key       string
	Payload   string
	Headers   map[string]string
	Partition int32
	Offset    int64
	Timestamp time.Time
}

// reader reads topics from their start on the brokers.
type reader struct {
	t  *testing.T
	cl *kgo.Client
}

func newReader(t *testing.T, brokers []string, topics ...string) *reader {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &reader{t: t, cl: cl}
}

// next returns the next n records, failing the test when they do not come
// within kototest.DefaultTimeout.
func (r *reader) next(n int) []record {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
	defer cancel()
	out := make([]record, 0, n)
	for len(out) < n {
		fs := r.cl.PollRecords(ctx, n-len(out))
		if ctx.Err() != nil {
			r.t.Fatalf("got %d of %d records: %v", len(out), n, ctx.Err())
		}
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			r.t.Fatalf("poll: %v", err)
		}
		fs.EachRecord(func(rec *kgo.Record) { out = append(out, toRecord(rec)) })
	}
	return out
}

// distinct reads until n messages (by UUID) not among before have arrived
// and returns every record it read, duplicates included.
func (r *reader) distinct(n int, before ...record) []record {
	r.t.Helper()
	var out []record
	seen := map[string]bool{}
	for _, rec := range before {
		seen[rec.UUID] = true
	}
	n += len(seen)
	for len(seen) < n {
		for _, rec := range r.next(n - len(seen)) {
			seen[rec.UUID] = true
			out = append(out, rec)
		}
	}
	return out
}

// drain returns the records that arrive within d.
func (r *reader) drain(d time.Duration) []record {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out []record
	for ctx.Err() == nil {
		r.cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) { out = append(out, toRecord(rec)) })
	}
	return out
}

// none checks that no record arrives within d.
func (r *reader) none(d time.Duration) {
	r.t.Helper()
	for _, rec := range r.drain(d) {
		r.t.Errorf("unexpected record %s %s: %s", rec.UUID, rec.Key, rec.Payload)
	}
}

func toRecord(rec *kgo.Record) record {
	h := map[string]string{}
	for _, kv := range rec.Headers {
		h[kv.Key] = string(kv.Value)
	}
	return record{
		UUID: h["_watermill_message_uuid"], Key: string(rec.Key), Payload: string(rec.Value),
		Headers: h, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp,
	}
}

// testLogger logs warnings and errors through t, and keeps them for
// logged.
func testLogger(t *testing.T) (*slog.Logger, *testWriter) {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})), w
}

type testWriter struct {
	mu    sync.Mutex
	t     *testing.T
	done  bool
	lines []string
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, string(p))
	if !w.done {
		w.t.Log(string(p))
	}
	return len(p), nil
}

// logged reports whether a line containing s was logged.
func (w *testWriter) logged(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

var _ io.Writer = (*testWriter)(nil)

// payloads numbers n payloads "<prefix>-<i>".
func payloads(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + "-" + strconv.Itoa(i)
	}
	return out
}
