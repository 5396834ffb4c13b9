package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/kafkatest"
	"github.com/koto-dev/watermill-koto/internal/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// ledger is a table where a batch handler writes one row per message, in
// the batch's transaction, and checks each key's order as it goes: a row
// of a key whose earlier message is not in the table yet is an error. With
// gaps, a key may skip messages (those dead-lettered), never go back.
type ledger struct {
	pool  *pgxpool.Pool
	table string
	state string // the next seq of each key
	gaps  bool
}

// newLedger returns the ledger of keys k0…k<keys-1>.
func newLedger(t *testing.T, pool *pgxpool.Pool, schema string, keys int, gaps bool) *ledger {
	t.Helper()
	l := &ledger{pool: pool, table: pgx.Identifier{schema, "ledger"}.Sanitize(), state: pgx.Identifier{schema, "ledger_next"}.Sanitize(), gaps: gaps}
	ddl := "CREATE TABLE " + l.table + " (key text NOT NULL, seq int NOT NULL, uuid text NOT NULL);" +
		"CREATE TABLE " + l.state + " (key text PRIMARY KEY, next int NOT NULL);" +
		"INSERT INTO " + l.state + " SELECT 'k' || i, 0 FROM generate_series(0, " + strconv.Itoa(keys-1) + ") AS i"
	if _, err := pool.Exec(context.Background(), ddl); err != nil {
		t.Fatalf("create ledger: %v", err)
	}
	return l
}

// entry is the payload of a ledger message: "key/seq".
func entry(key string, seq int) []byte { return []byte(key + "/" + strconv.Itoa(seq)) }

func parseEntry(msg *message.Message) (key string, seq int, err error) {
	key, s, _ := strings.Cut(string(msg.Payload), "/")
	seq, err = strconv.Atoi(s)
	return key, seq, err
}

// write records msgs in the transaction of ctx, in one round trip; a
// message out of its key's order makes the whole batch fail with an error
// that names it.
func (l *ledger) write(ctx context.Context, msgs []*message.Message) error {
	tx, ok := postgres.TxFromContext(ctx)
	if !ok {
		return koto.Poison(errors.New("no transaction in the batch's context"))
	}
	return l.writeTx(ctx, tx, msgs)
}

// writeTx records msgs in tx, as write does.
func (l *ledger) writeTx(ctx context.Context, tx pgx.Tx, msgs []*message.Message) error {
	b := &pgx.Batch{}
	for _, m := range msgs {
		key, seq, err := parseEntry(m)
		if err != nil {
			return koto.Poison(err)
		}
		cmp := "="
		if l.gaps {
			cmp = "<="
		}
		b.Queue("UPDATE "+l.state+" SET next = $2 + 1 WHERE key = $1 AND next "+cmp+" $2", key, seq)
		b.Queue("INSERT INTO "+l.table+" (key, seq, uuid) VALUES ($1, $2, $3)", key, seq, m.UUID)
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for _, m := range msgs {
		tag, err := br.Exec()
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return koto.Poison(fmt.Errorf("message %s (%s) is out of its key's order", m.UUID, m.Payload))
		}
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}

// check fails t unless the ledger holds exactly keys × perKey rows, each
// key's seqs 0..perKey-1 once each.
func (l *ledger) check(t *testing.T, keys, perKey int) {
	t.Helper()
	var rows, distinct, keyCount int
	err := l.pool.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT (key, seq)), count(DISTINCT key) FROM "+l.table).Scan(&rows, &distinct, &keyCount)
	if err != nil {
		t.Fatalf("read ledger: %v", err)
	}
	if want := keys * perKey; rows != want || distinct != want || keyCount != keys {
		t.Errorf("ledger has %d rows, %d distinct, of %d keys; want %d of %d keys, each once", rows, distinct, keyCount, want, keys)
	}
}

// checkDistinct fails t if a message is in the ledger twice.
func (l *ledger) checkDistinct(t *testing.T) {
	t.Helper()
	var rows, distinct int
	err := l.pool.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT uuid) FROM "+l.table).Scan(&rows, &distinct)
	if err != nil {
		t.Fatalf("read ledger: %v", err)
	}
	if rows != distinct {
		t.Errorf("ledger has %d rows of %d distinct messages: a message was written twice", rows, distinct)
	}
}

func (l *ledger) rows() int {
	var n int
	if err := l.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+l.table).Scan(&n); err != nil {
		return -1
	}
	return n
}

// keyedMessages returns perKey messages for each of keys keys, in each
// key's order, interleaved: message i has key i%keys.
func keyedMessages(keys, perKey int) []*message.Message {
	msgs := make([]*message.Message, 0, keys*perKey)
	for i := range keys * perKey {
		key := "k" + strconv.Itoa(i%keys)
		m := message.NewMessage(watermill.NewUUID(), entry(key, i/keys))
		m.Metadata.Set(koto.PartitionKeyMetadataKey, key)
		msgs = append(msgs, m)
	}
	return msgs
}

// batchRig is a router handler of batches on a concurrent subscriber.
type batchRig struct {
	env   *kafkaEnv
	topic string
	group string
	chain *middleware.BatchChain
}

func newBatchRig(t *testing.T, env *kafkaEnv, topic string, cfg middleware.Config, batch middleware.BatchConfig) *batchRig {
	t.Helper()
	if cfg.Publisher == nil {
		cfg.Publisher = env.pub
	}
	if cfg.Logger == nil {
		cfg.Logger = kafkatest.Logger(0)
	}
	cfg.DeadLetter.Backoff = koto.Backoff{InitialInterval: fastBackoff.initial, MaxInterval: fastBackoff.max}
	chain, err := middleware.BatchDefaults(cfg, batch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = chain.Close(context.Background()) })
	r := &batchRig{env: env, topic: topic, group: kafkatest.Group(t, "batches"), chain: chain}
	env.provision(t, topics.DeadLetter(r.group))
	return r
}

// run starts a router with the rig's handler of h.
func (r *batchRig) run(t *testing.T, h middleware.BatchHandlerFunc) (stop func()) {
	t.Helper()
	router := kafkatest.NewRouter(t, nil)
	sub := kafkatest.NewSubscriber(t, broker.Config{Brokers: r.env.brokers, ConsumerGroup: r.group,
		Concurrency: 1000, Ordering: broker.OrderByKeyInBatches, NackResendSleep: 10 * time.Millisecond})
	router.AddConsumerHandler(r.group, r.topic, sub, r.chain.Handler(h)).AddMiddleware(r.chain.Middlewares()...)
	return kafkatest.RunRouter(t, router)
}

// batchSizes records the size of each batch a handler gets.
type batchSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (s *batchSizes) wrap(h middleware.BatchHandlerFunc) middleware.BatchHandlerFunc {
	return func(ctx context.Context, msgs []*message.Message) error {
		s.mu.Lock()
		s.sizes = append(s.sizes, len(msgs))
		s.mu.Unlock()
		return h(ctx, msgs)
	}
}

func (s *batchSizes) stats() (calls, largest int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.sizes {
		largest = max(largest, n)
	}
	return len(s.sizes), largest
}

// TestBatchTransactionalIsExactAndInOrder: 4 000 messages of 40 keys on 4
// partitions, 2 % of them republished with the same UUID, through a
// transactional batch handler that writes a ledger row per message and
// checks each key's order in the batch's transaction: the ledger is
// exact, no key is out of order, the duplicates never reach the handler,
// and the batches hold many messages.
func TestBatchTransactionalIsExactAndInOrder(t *testing.T) {
	const keys, perKey = 40, 100
	env := newKafkaEnv(t)
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	store, lg := postgresStoreIn(t, pool, schema), newLedger(t, pool, schema, keys, false)
	topic := kafkatest.NewTopic(t, broker.Config{Brokers: env.brokers, Provision: broker.ProvisionConfig{Partitions: 4}}, "ledger")
	msgs := keyedMessages(keys, perKey)
	var republished atomic.Int64
	env.publish(t, topic, kafkatest.WithDuplicates(msgs, func(i int) bool {
		dup := i%50 == 7
		if dup {
			republished.Add(1)
		}
		return dup
	})...)

	var duplicates atomic.Int64
	logs := &logCapture{}
	rig := newBatchRig(t, env, topic, middleware.Config{Store: store, Logger: logs.logger(), Idempotency: middleware.IdempotencyConfig{
		Transactional: true,
		OnDuplicate:   func(*message.Message, string, string) { duplicates.Add(1) },
	}}, middleware.BatchConfig{MaxMessages: 500, MaxWait: 20 * time.Millisecond})
	var sizes batchSizes
	seen := map[string]int{}
	var seenMu sync.Mutex
	rig.run(t, sizes.wrap(func(ctx context.Context, batch []*message.Message) error {
		seenMu.Lock()
		for _, m := range batch {
			seen[m.UUID]++
		}
		seenMu.Unlock()
		return lg.write(ctx, batch)
	}))
	kafkatest.WaitFor(t, "every message in the ledger and every duplicate skipped", func() bool {
		return lg.rows() >= keys*perKey && duplicates.Load() >= republished.Load()
	})
	lg.check(t, keys, perKey)
	if d := duplicates.Load(); d != republished.Load() {
		t.Errorf("%d duplicates skipped, want %d", d, republished.Load())
	}
	seenMu.Lock()
	for uuid, n := range seen {
		if n != 1 {
			t.Errorf("message %s reached the handler %d times, want once", uuid, n)
		}
	}
	seenMu.Unlock()
	calls, largest := sizes.stats()
	if largest < 50 {
		t.Errorf("the largest batch had %d messages, want batches of many", largest)
	}
	lines := logs.lines(t)
	batchLines, handled := where(lines, "msg", "batch handled"), 0
	for _, l := range batchLines {
		handled += int(l["handled"].(float64)) + int(l["duplicates"].(float64))
	}
	if handled != keys*perKey+int(republished.Load()) {
		t.Errorf("%d batch lines count %d messages, want one line per batch counting all %d", len(batchLines), handled, keys*perKey+int(republished.Load()))
	}
	if n := len(where(lines, "msg", "message handled")); n != 0 {
		t.Errorf("%d per-message lines, want none: a batch logs one line", n)
	}
	t.Logf("%d handler calls, largest batch %d, %d duplicates skipped", calls, largest, duplicates.Load())
}

// TestBatchHotKey: 5 000 messages of one key still form full batches, in
// order, each once.
func TestBatchHotKey(t *testing.T) {
	const perKey = 5000
	env := newKafkaEnv(t)
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	store, lg := postgresStoreIn(t, pool, schema), newLedger(t, pool, schema, 1, false)
	topic := env.topic(t, "hot")
	env.publish(t, topic, keyedMessages(1, perKey)...)

	rig := newBatchRig(t, env, topic, middleware.Config{Store: store, Idempotency: middleware.IdempotencyConfig{Transactional: true}},
		middleware.BatchConfig{MaxMessages: 500, MaxWait: 20 * time.Millisecond})
	var sizes batchSizes
	rig.run(t, sizes.wrap(lg.write))
	kafkatest.WaitFor(t, "every message in the ledger", func() bool { return lg.rows() >= perKey })
	lg.check(t, 1, perKey)
	calls, largest := sizes.stats()
	if largest < 100 {
		t.Errorf("the largest batch of the hot key had %d messages, want many", largest)
	}
	t.Logf("%d handler calls, largest batch %d", calls, largest)
}

// TestBatchCheckHandleMark: without a transaction, one statement checks a
// batch's keys and one marks them; messages republished after they were
// handled are skipped, with the PostgreSQL store and with the in-memory
// one, which is called per key.
func TestBatchCheckHandleMark(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T, pool *pgxpool.Pool, schema string) idempotency.Store
	}{
		{"postgres", func(t *testing.T, pool *pgxpool.Pool, schema string) idempotency.Store {
			return postgresStoreIn(t, pool, schema)
		}},
		{"memory", func(t *testing.T, _ *pgxpool.Pool, _ string) idempotency.Store { return memoryStore(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const keys, perKey = 20, 50
			env := newKafkaEnv(t)
			pool := pgtest.Pool(t)
			schema := pgtest.Schema(t, pool)
			lg := newLedger(t, pool, schema, keys, false)
			topic := env.topic(t, "chm")
			msgs := keyedMessages(keys, perKey)
			env.publish(t, topic, msgs...)
			var duplicates atomic.Int64
			rig := newBatchRig(t, env, topic, middleware.Config{Store: tc.store(t, pool, schema), Idempotency: middleware.IdempotencyConfig{
				OnDuplicate: func(*message.Message, string, string) { duplicates.Add(1) },
			}}, middleware.BatchConfig{MaxMessages: 200, MaxWait: 20 * time.Millisecond})
			rig.run(t, func(ctx context.Context, batch []*message.Message) error {
				return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return lg.writeTx(ctx, tx, batch) })
			})
			kafkatest.WaitFor(t, "every message in the ledger", func() bool { return lg.rows() >= keys*perKey })
			env.publish(t, topic, msgs[:100]...) // again, after they were handled
			kafkatest.WaitFor(t, "100 duplicates skipped", func() bool { return duplicates.Load() >= 100 })
			lg.check(t, keys, perKey)
		})
	}
}

// TestBatchChainClose: after Close a delivery is an outage that wraps
// ErrClosed, nacked for another instance to handle; a bad BatchConfig is
// refused with the field named.
func TestBatchChainClose(t *testing.T) {
	chain, err := middleware.BatchDefaults(middleware.Config{Publisher: discardPublisher{}}, middleware.BatchConfig{})
	if err != nil {
		t.Fatal(err)
	}
	handle := chain.Handler(func(context.Context, []*message.Message) error { return nil })
	if err := chain.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	err = handle(message.NewMessage(watermill.NewUUID(), nil))
	if !errors.Is(err, middleware.ErrClosed) || koto.ClassOf(err) != koto.ClassOutage {
		t.Errorf("a delivery after Close = %v, want an outage wrapping ErrClosed", err)
	}
	_, err = middleware.BatchDefaults(middleware.Config{Publisher: discardPublisher{}}, middleware.BatchConfig{MaxMessages: -1})
	if !errors.Is(err, koto.ErrInvalidConfig) || !strings.Contains(err.Error(), "MaxMessages") {
		t.Errorf("MaxMessages -1: %v, want an invalid configuration naming MaxMessages", err)
	}
}

type discardPublisher struct{}

func (discardPublisher) Publish(string, ...*message.Message) error { return nil }
func (discardPublisher) Close() error                              { return nil }
