package middleware_test

import (
	"context"
	"errors"
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
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// batchRig is a router handler of batches on a concurrent subscriber.
type batchRig struct {
	env   *kafkaEnv
	topic string
	group string
	chain *middleware.BatchChain
	batch broker.BatchConfig
}

func newBatchRig(t *testing.T, env *kafkaEnv, topic string, cfg middleware.Config, batch broker.BatchConfig) *batchRig {
	t.Helper()
	if cfg.Publisher == nil {
		cfg.Publisher = env.pub
	}
	if cfg.Logger == nil {
		cfg.Logger = kototest.Logger(0)
	}
	cfg.DeadLetter.Backoff = koto.Backoff{InitialInterval: fastBackoff.initial, MaxInterval: fastBackoff.max}
	chain, err := middleware.BatchDefaults(cfg, middleware.BatchConfig{Backoff: koto.Backoff{InitialInterval: 20 * time.Millisecond, MaxInterval: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = chain.Close(context.Background()) })
	r := &batchRig{env: env, topic: topic, group: kototest.Group(t, "batches"), chain: chain, batch: batch}
	env.provision(t, topics.DeadLetter(r.group))
	return r
}

// run starts a router with the rig's handler of h.
func (r *batchRig) run(t *testing.T, h middleware.BatchHandlerFunc) (stop func()) {
	t.Helper()
	router := kototest.NewRouter(t, nil)
	sub, err := broker.NewBatchSubscriber(broker.Config{Brokers: r.env.brokers, ConsumerGroup: r.group,
		Batch: r.batch, NackResendSleep: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	router.AddConsumerHandler(r.group, r.topic, sub, r.chain.Handler(h))
	return kototest.RunRouter(t, router)
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
	topic := kototest.NewTopic(t, broker.Config{Brokers: env.brokers, Provision: broker.ProvisionConfig{Partitions: 4}}, "ledger")
	msgs := keyedMessages(keys, perKey)
	var republished atomic.Int64
	env.publish(t, topic, kototest.WithDuplicates(msgs, func(i int) bool {
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
	}}, broker.BatchConfig{MaxMessages: 500, MaxWait: 20 * time.Millisecond})
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
	kototest.WaitFor(t, "every message in the ledger and every duplicate skipped", func() bool {
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
		broker.BatchConfig{MaxMessages: 500, MaxWait: 20 * time.Millisecond})
	var sizes batchSizes
	rig.run(t, sizes.wrap(lg.write))
	kototest.WaitFor(t, "every message in the ledger", func() bool { return lg.rows() >= perKey })
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
			}}, broker.BatchConfig{MaxMessages: 200, MaxWait: 20 * time.Millisecond})
			rig.run(t, func(ctx context.Context, batch []*message.Message) error {
				return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return lg.writeTx(ctx, tx, batch) })
			})
			kototest.WaitFor(t, "every message in the ledger", func() bool { return lg.rows() >= keys*perKey })
			env.publish(t, topic, msgs[:100]...) // again, after they were handled
			kototest.WaitFor(t, "100 duplicates skipped", func() bool { return duplicates.Load() >= 100 })
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
	_, err = middleware.BatchDefaults(middleware.Config{Publisher: discardPublisher{}}, middleware.BatchConfig{Backoff: koto.Backoff{Multiplier: 0.5}})
	if !errors.Is(err, koto.ErrInvalidConfig) || !strings.Contains(err.Error(), "Multiplier") {
		t.Errorf("Backoff.Multiplier 0.5: %v, want an invalid configuration naming Multiplier", err)
	}
}

type discardPublisher struct{}

func (discardPublisher) Publish(string, ...*message.Message) error { return nil }
func (discardPublisher) Close() error                              { return nil }

// TestBatchCheckHandleMarkOfOneMessage: check-handle-mark batches of one
// message each (MaxMessages 1, as a retry runs alone) handle every
// message not processed before, once, and skip those marked beforehand.
func TestBatchCheckHandleMarkOfOneMessage(t *testing.T) {
	const n, premarked = 20, 5
	env := newKafkaEnv(t)
	pool := pgtest.Pool(t)
	store := postgresStoreIn(t, pool, pgtest.Schema(t, pool))
	topic := env.topic(t, "single")
	var duplicates atomic.Int64
	rig := newBatchRig(t, env, topic, middleware.Config{Store: store, Idempotency: middleware.IdempotencyConfig{
		OnDuplicate: func(*message.Message, string, string) { duplicates.Add(1) },
	}}, broker.BatchConfig{MaxMessages: 1})
	msgs := keyedMessages(4, n/4)
	for _, m := range msgs[:premarked] {
		if err := store.MarkProcessed(t.Context(), idempotency.ScopedKey(rig.group, m.UUID)); err != nil {
			t.Fatal(err)
		}
	}
	env.publish(t, topic, msgs...)

	var mu sync.Mutex
	handled := map[string]int{}
	var sizes batchSizes
	rig.run(t, sizes.wrap(func(_ context.Context, batch []*message.Message) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range batch {
			handled[m.UUID]++
		}
		return nil
	}))
	kototest.WaitFor(t, "every message handled or skipped", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled)+int(duplicates.Load()) >= n
	})
	mu.Lock()
	defer mu.Unlock()
	for i, m := range msgs {
		if want := map[bool]int{true: 0, false: 1}[i < premarked]; handled[m.UUID] != want {
			t.Errorf("message %d reached the handler %d times, want %d", i, handled[m.UUID], want)
		}
	}
	if d := duplicates.Load(); d != premarked {
		t.Errorf("%d duplicates skipped, want %d", d, premarked)
	}
	if _, largest := sizes.stats(); largest != 1 {
		t.Errorf("a batch of %d messages, want one each", largest)
	}
}
