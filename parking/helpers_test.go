package parking_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/dlqmeta"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/parking"
	"github.com/koto-dev/watermill-koto/topics"
)

// fast is the tests' backoff of retries in place and of store outages.
var fast = koto.Backoff{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond}

// env is a database schema with an outbox, its forwarder, an idempotency
// store, a parking store and a table of effects, and Kafka.
type env struct {
	t       *testing.T
	pool    *pgxpool.Pool
	schema  string
	brokers []string
	box     *outbox.Outbox
	parked  *parking.Store
	store   *postgres.Store
	pub     *broker.Publisher
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cfg := pgtest.Config(t)
	cfg.MaxConns = 24
	pool := pgtest.PoolWith(t, cfg)
	e := &env{t: t, pool: pool, schema: pgtest.Schema(t, pool), brokers: kototest.Brokers(t)}
	ctx := kototest.Context(t)
	var err error
	if e.box, err = outbox.New(pool, outbox.Config{Schema: e.schema}); err != nil {
		t.Fatal(err)
	}
	if err := e.box.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if e.parked, err = parking.NewStore(pool, e.box, parking.Config{Schema: e.schema}); err != nil {
		t.Fatal(err)
	}
	if err := e.parked.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if e.store, err = postgres.NewStore(pool, postgres.Config{Schema: e.schema, CleanupInterval: -1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.store.Close() })
	pgtest.Exec(t, pool, "CREATE TABLE "+e.schema+".effects (seq bigserial PRIMARY KEY, key text NOT NULL, idx int NOT NULL, grp text NOT NULL)")
	e.pub = kototest.NewPublisher(t, broker.Config{Brokers: e.brokers})
	e.forward()
	return e
}

// forward runs a forwarder of the outbox until the test ends.
func (e *env) forward() {
	f, err := outbox.NewForwarder(e.box, outbox.ForwarderConfig{
		Broker: broker.Config{Brokers: e.brokers}, PollInterval: 200 * time.Millisecond,
		Logger: kototest.Logger(slog.LevelWarn),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Run(context.Background()) }()
	e.t.Cleanup(func() {
		_ = f.Close()
		if err := <-done; err != nil {
			e.t.Errorf("forwarder: %v", err)
		}
	})
}

// topic provisions a topic of partitions partitions.
func (e *env) topic(prefix string, partitions int32) string {
	return kototest.NewTopic(e.t, broker.Config{Brokers: e.brokers, Provision: broker.ProvisionConfig{Partitions: partitions}}, prefix)
}

// item is a test message: the idx-th of key.
type item struct {
	Key string `json:"key"`
	Idx int    `json:"idx"`
}

// publish publishes n messages on each of keys, in index order.
func (e *env) publish(topic string, keys []string, n int) {
	e.t.Helper()
	e.publishFrom(topic, keys, 0, n)
}

// publishFrom publishes the messages from..to-1 of each of keys, in index
// order.
func (e *env) publishFrom(topic string, keys []string, from, to int) {
	e.t.Helper()
	var msgs []*message.Message
	for i := from; i < to; i++ {
		for _, k := range keys {
			msgs = append(msgs, itemMessage(k, i))
		}
	}
	if err := e.pub.Publish(topic, msgs...); err != nil {
		e.t.Fatal(err)
	}
}

func itemMessage(key string, idx int) *message.Message {
	payload, _ := json.Marshal(item{Key: key, Idx: idx})
	msg := message.NewMessage(uuid.Must(uuid.NewV7()).String(), payload)
	msg.Metadata.Set(koto.PartitionKeyMetadataKey, key)
	return msg
}

// consumer is a consumer group's router handler on a topic, behind
// middleware.Defaults in the transactional mode, with parking.
type consumer struct {
	group, topic string
	concurrency  int
	maxAttempts  int
	delays       []time.Duration
	// fail returns the error of the attempt-th call (from 1) of it, nil
	// to succeed and write its effect.
	fail func(it item, attempt int) error
}

// run runs c until the test ends or stop is called; calls counts the
// handler calls by item.
func (e *env) run(c consumer) (stop func(), calls *kototest.Counter) {
	e.t.Helper()
	calls = new(kototest.Counter)
	chain, err := middleware.Defaults(middleware.Config{
		Publisher: e.pub, Store: e.store, Logger: kototest.Logger(slog.LevelWarn),
		Idempotency: middleware.IdempotencyConfig{Transactional: true, Outbox: e.box.ContextPublisher()},
		DeadLetter: middleware.DeadLetterConfig{MaxAttempts: c.maxAttempts, Backoff: fast,
			Parking: middleware.ParkingConfig{Store: e.parked, Delays: c.delays}},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	sub := kototest.NewSubscriber(e.t, broker.Config{Brokers: e.brokers, ConsumerGroup: c.group, Concurrency: c.concurrency,
		Sarama: kototest.QuickGroupSession})
	r := kototest.NewRouter(e.t, kototest.Logger(slog.LevelWarn))
	r.AddConsumerHandler(c.group, c.topic, sub, func(msg *message.Message) error {
		var it item
		if err := json.Unmarshal(msg.Payload, &it); err != nil {
			return koto.Poison(err)
		}
		if c.fail != nil {
			if err := c.fail(it, calls.Add(fmt.Sprintf("%s/%d", it.Key, it.Idx))); err != nil {
				return err
			}
		} else {
			calls.Add(fmt.Sprintf("%s/%d", it.Key, it.Idx))
		}
		tx, ok := postgres.TxFromContext(msg.Context())
		if !ok {
			return koto.Poison(fmt.Errorf("no transaction"))
		}
		_, err := tx.Exec(msg.Context(), "INSERT INTO "+e.schema+".effects (key, idx, grp) VALUES ($1, $2, $3)", it.Key, it.Idx, c.group)
		return err
	}).AddMiddleware(chain.Middlewares()...)
	stopRouter := kototest.RunRouter(e.t, r)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			stopRouter()
			ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
			defer cancel()
			_ = chain.Close(ctx)
		})
	}
	e.t.Cleanup(stop)
	return stop, calls
}

// effects returns group's effects, by key, each key's indexes in the order
// they were written.
func (e *env) effects(group string) map[string][]int {
	e.t.Helper()
	rows, err := e.pool.Query(kototest.Context(e.t), "SELECT key, idx FROM "+e.schema+".effects WHERE grp = $1 ORDER BY seq", group)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string][]int{}
	var key string
	var idx int
	if _, err := pgx.ForEachRow(rows, []any{&key, &idx}, func() error { out[key] = append(out[key], idx); return nil }); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// count returns how many effects group wrote.
func (e *env) count(group string) int {
	return int(pgtest.QueryInt(e.t, e.pool, "SELECT count(*) FROM "+e.schema+".effects WHERE grp = $1", group))
}

// parkedRows counts the rows of the parking table.
func (e *env) parkedRows() int {
	return int(pgtest.QueryInt(e.t, e.pool, "SELECT count(*) FROM "+e.parked.Table()))
}

// inOrder checks that each of keys has the effects 0..n-1, once each, in
// that order.
func inOrder(t *testing.T, fx map[string][]int, keys []string, n int) {
	t.Helper()
	for _, k := range keys {
		got := fx[k]
		ok := len(got) == n
		for i := 0; ok && i < n; i++ {
			ok = got[i] == i
		}
		if !ok {
			t.Errorf("key %s: effects %v, want 0..%d once each, in order", k, got, n-1)
		}
	}
}

// keys returns n key names.
func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// watchDeadLetters returns the dead letters of group as they arrive.
func watchDeadLetters(t *testing.T, brokers []string, group string) <-chan *message.Message {
	t.Helper()
	topic := topics.DeadLetter(group)
	kototest.Provision(t, broker.Config{Brokers: brokers}, topic)
	out := make(chan *message.Message, 16)
	kototest.Watch(t, brokers, topic, func(m *message.Message) { out <- m })
	return out
}

// checkDeadLetter checks the dead letter of a message parked parkings
// times, consumed first at offset.
func checkDeadLetter(t *testing.T, dl *message.Message, parkings int, offset string) {
	t.Helper()
	var history []middleware.ParkedAttempt
	if err := json.Unmarshal([]byte(dl.Metadata.Get(dlqmeta.History)), &history); err != nil || len(history) != parkings {
		t.Errorf("dead letter history %q (%v), want %d parkings", dl.Metadata.Get(dlqmeta.History), err, parkings)
	}
	for i, h := range history {
		if h.Error == "" || h.Attempts < 1 || h.RetryAt.Before(h.FailedAt) {
			t.Errorf("history[%d] = %+v, want the error, the attempts and a retry after the failure", i, h)
		}
	}
	if got := dl.Metadata.Get(dlqmeta.OriginalOffset); got != offset {
		t.Errorf("dead letter's original offset %q, want %s: where it was consumed first", got, offset)
	}
	for _, k := range []string{middleware.ParkedIDKey, middleware.ParkedGroupKey} {
		if v, ok := dl.Metadata[k]; ok {
			t.Errorf("dead letter carries %s=%q: a replay would be taken for a parked copy", k, v)
		}
	}
}

// runPlain runs group's handler on topic behind middleware.Defaults
// without idempotency or parking, counting its calls by item.
func (e *env) runPlain(group, topic string) (stop func(), calls *kototest.Counter) {
	e.t.Helper()
	calls = new(kototest.Counter)
	chain, err := middleware.Defaults(middleware.Config{Publisher: e.pub, Logger: kototest.Logger(slog.LevelWarn),
		DeadLetter: middleware.DeadLetterConfig{Backoff: fast}})
	if err != nil {
		e.t.Fatal(err)
	}
	sub := kototest.NewSubscriber(e.t, broker.Config{Brokers: e.brokers, ConsumerGroup: group, Sarama: kototest.QuickGroupSession})
	r := kototest.NewRouter(e.t, kototest.Logger(slog.LevelWarn))
	r.AddConsumerHandler(group, topic, sub, func(msg *message.Message) error {
		var it item
		if err := json.Unmarshal(msg.Payload, &it); err != nil {
			return koto.Poison(err)
		}
		calls.Add(fmt.Sprintf("%s/%d", it.Key, it.Idx))
		return nil
	}).AddMiddleware(chain.Middlewares()...)
	return kototest.RunRouter(e.t, r), calls
}
