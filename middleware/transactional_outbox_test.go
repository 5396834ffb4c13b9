package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
)

// newOutbox returns the outbox of schema, set up.
func newOutbox(t *testing.T, pool *pgxpool.Pool, schema string) *outbox.Outbox {
	t.Helper()
	box, err := outbox.New(pool, outbox.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	return box
}

// outboxRow is a row of the outbox as a test reads it: its envelope.
type outboxRow struct {
	Topic    string            `json:"destination_topic"`
	UUID     string            `json:"uuid"`
	Payload  []byte            `json:"payload"`
	Metadata map[string]string `json:"metadata"`
}

// outboxRows returns the rows of box in the order the forwarder sends
// them.
func outboxRows(t *testing.T, pool *pgxpool.Pool, box *outbox.Outbox) []outboxRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT payload FROM `+box.Table()+` ORDER BY transaction_id, "offset"`)
	if err != nil {
		t.Fatal(err)
	}
	envs, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatal(err)
	}
	out := make([]outboxRow, len(envs))
	for i, env := range envs {
		if err := json.Unmarshal(env, &out[i]); err != nil {
			t.Fatalf("outbox row %s: %v", env, err)
		}
	}
	return out
}

// TestTransactionalOutboxWritesReturnedMessages runs a router handler with
// a publish topic in the transactional mode with an outbox. The messages
// it returns are written into the outbox in its transaction, for the
// publish topic, with the correlation ID: those of a failed attempt roll
// back with it, a duplicate writes none, and the router publishes nothing
// to Kafka itself. The work registered with outbox.AfterCommit runs once
// per commit.
func TestTransactionalOutboxWritesReturnedMessages(t *testing.T) {
	e := newKafkaEnv(t)
	in, out := e.topic(t, "in"), e.topic(t, "out")
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	store := postgresStoreIn(t, pool, schema)
	fx := newEffects(t, pool, schema)
	box := newOutbox(t, pool, schema)

	var duplicates, afterCommit atomic.Int64
	chain := defaultsChain(t, middleware.Config{
		Publisher: e.pub, Store: store, Logger: slog.New(slog.DiscardHandler),
		Idempotency: middleware.IdempotencyConfig{
			Transactional: true,
			Outbox:        box.ContextPublisher(),
			OnDuplicate:   func(*message.Message, string, string) { duplicates.Add(1) },
		},
		DeadLetter: middleware.DeadLetterConfig{Backoff: koto.Backoff{InitialInterval: fastBackoff.initial, MaxInterval: fastBackoff.max}},
	})
	msgs := newMessages(2)
	a, b := msgs[0], msgs[1]
	a.Metadata.Set(correlation.MetadataKey, "corr-a")
	attempts := new(kototest.Counter)
	handle := func(msg *message.Message) ([]*message.Message, error) {
		if err := fx.insert(msg); err != nil {
			return nil, err
		}
		if err := outbox.AfterCommit(msg.Context(), func() { afterCommit.Add(1) }); err != nil {
			return nil, err
		}
		receipts := []*message.Message{
			message.NewMessage(uuid.NewString(), []byte("receipt-1 of "+msg.UUID)),
			message.NewMessage(uuid.NewString(), []byte("receipt-2 of "+msg.UUID)),
		}
		if attempts.Add(msg.UUID) == 1 && msg.UUID == b.UUID {
			return receipts, errors.New("failed after writing")
		}
		return receipts, nil
	}
	e.runRouter(t, handlerSpec{name: kototest.Group(t, "receipts"), topic: in, middlewares: chain, produce: handle, publishTopic: out})
	e.publish(t, in, a, b, kototest.Republish(a))

	kototest.WaitFor(t, "both messages committed and the duplicate skipped", func() bool {
		return afterCommit.Load() == 2 && duplicates.Load() == 1
	})
	rows := outboxRows(t, pool, box)
	if len(rows) != 4 {
		t.Fatalf("%d outbox rows, want 4: two receipts for each message, none of the failed attempt or the duplicate", len(rows))
	}
	for _, r := range rows {
		of := strings.TrimPrefix(strings.TrimPrefix(string(r.Payload), "receipt-1 of "), "receipt-2 of ")
		corr := r.Metadata[correlation.MetadataKey]
		switch {
		case r.Topic != out:
			t.Errorf("receipt %q is bound for %s, want the publish topic %s", r.Payload, r.Topic, out)
		case of == a.UUID && corr != "corr-a", of == b.UUID && corr == "":
			t.Errorf("receipt %q has correlation ID %q", r.Payload, corr)
		}
	}
	if rows, distinct := fx.counts(); rows != 2 || distinct != 2 || attempts.Get(b.UUID) != 2 {
		t.Errorf("%d effect rows of %d messages after %d attempts of the failing one; want 2, 2, 2", rows, distinct, attempts.Get(b.UUID))
	}
	if n := kototest.Records(t, e.brokers, out); n != 0 {
		t.Errorf("the router published %d records to %s itself", n, out)
	}
}

// TestTransactionalOutboxNeedsAPublishTopic: returned messages with an
// outbox but no publish topic (a handler added without a publisher) are
// poison, and nothing of the attempt is kept.
func TestTransactionalOutboxNeedsAPublishTopic(t *testing.T) {
	e := newRaceEnv(t)
	box := newOutbox(t, e.pool, e.schema)
	mw, err := middleware.Idempotency(e.store, middleware.IdempotencyConfig{Transactional: true, Outbox: box.ContextPublisher()})
	if err != nil {
		t.Fatal(err)
	}
	handler := mw(func(msg *message.Message) ([]*message.Message, error) {
		if err := e.fx.insert(msg); err != nil {
			return nil, err
		}
		return []*message.Message{message.NewMessage(uuid.NewString(), nil)}, nil
	})
	_, err = handler(newMessages(1)[0])
	if !errors.Is(err, middleware.ErrReturnedMessagesInTx) || koto.ClassOf(err) != koto.ClassPoison ||
		!strings.Contains(err.Error(), "publish topic") {
		t.Fatalf("handler = %v (class %v), want ErrReturnedMessagesInTx as poison, naming the publish topic", err, koto.ClassOf(err))
	}
	if rows, _ := e.fx.counts(); rows != 0 || len(outboxRows(t, e.pool, box)) != 0 {
		t.Errorf("%d effect rows and %d outbox rows kept", rows, len(outboxRows(t, e.pool, box)))
	}
}

// TestTransactionalLockKeys: with LockKeys, a delivery takes its keys'
// locks before its claim, so a second delivery of another message with the
// same key waits before its first write, without a transaction ID, until
// the first commits; the outbox then holds their messages in commit order.
// LockKeys inside the handler comes after the claim and is refused.
func TestTransactionalLockKeys(t *testing.T) {
	cfg := pgtest.Config(t)
	app := "koto-test-" + strings.ReplaceAll(pgtest.Name("lock"), "_", "-")
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool := pgtest.PoolWith(t, cfg)
	schema := pgtest.Schema(t, pool)
	store := postgresStoreIn(t, pool, schema)
	box := newOutbox(t, pool, schema)
	mw, err := middleware.Idempotency(store, middleware.IdempotencyConfig{
		Transactional: true,
		Outbox:        box.ContextPublisher(),
		LockKeys:      func(msg *message.Message) ([]string, error) { return []string{msg.Metadata.Get("order")}, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	topic := kototest.Topic(t, "locked")
	entered, release := make(chan string, 2), make(chan struct{})
	var releaseOnce sync.Once
	releaseFirst := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseFirst) // a failed test must not leave the first handler holding its connection
	handler := mw(func(msg *message.Message) ([]*message.Message, error) {
		ctx := msg.Context()
		tx, _ := postgres.TxFromContext(ctx)
		if err := box.LockKeys(ctx, tx, "late"); !errors.Is(err, outbox.ErrKeyLockAfterWrite) {
			return nil, koto.Poison(errors.New("LockKeys after the claim was not refused"))
		}
		out := message.NewMessage(uuid.NewString(), msg.Payload)
		out.SetContext(ctx)
		if err := box.ContextPublisher().Publish(topic, out); err != nil {
			return nil, err
		}
		entered <- string(msg.Payload)
		if string(msg.Payload) == "first" {
			<-release
		}
		return nil, nil
	})
	deliver := func(payload string) <-chan error {
		msg := message.NewMessage(uuid.NewString(), []byte(payload))
		msg.Metadata.Set("order", "order-7")
		done := make(chan error, 1)
		go func() { _, err := handler(msg); done <- err }()
		return done
	}

	first := deliver("first")
	if got := kototest.Receive(t, entered, "a handler entered"); got != "first" {
		t.Fatalf("entered %q", got)
	}
	second := deliver("second")
	kototest.WaitFor(t, "the second delivery to wait for the key lock before any write", func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event = 'advisory' AND backend_xid IS NULL`, app).Scan(&n)
		return err == nil && n == 1
	})
	if len(entered) != 0 {
		t.Fatal("the second delivery ran its handler while the first held the key")
	}
	releaseFirst()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := kototest.Receive(t, entered, "a handler entered"); got != "second" {
		t.Fatalf("entered %q", got)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	rows := outboxRows(t, pool, box)
	if len(rows) != 2 || string(rows[0].Payload) != "first" || string(rows[1].Payload) != "second" {
		t.Fatalf("outbox order %v, want first then second", rows)
	}
}

// TestOutboxConfigErrorsNameTheField: an outbox or key locks where they
// cannot work fail at construction, naming the field; so does an Outbox
// that is not the outbox's ContextPublisher.
func TestOutboxConfigErrorsNameTheField(t *testing.T) {
	pool := pgtest.LazyPool(t)
	store := postgresStoreIn(t, pool, "koto")
	box, err := outbox.New(pool, outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	pub := gochannel.NewGoChannel(gochannel.Config{}, nil)
	defer pub.Close()
	keys := func(*message.Message) ([]string, error) { return nil, nil }
	const notTransactional = "Transactional is not set, but Outbox, LockKeys or DeferClaim is"
	// A publisher with a transaction of its own would commit the returned
	// messages apart from the claim.
	tx, err := pgtest.Pool(t).Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	inTx := func(pub message.Publisher) middleware.IdempotencyConfig {
		return middleware.IdempotencyConfig{Transactional: true, Outbox: pub}
	}
	apart := func(pub message.Publisher) string {
		return fmt.Sprintf("Outbox is a %T that does not write into the transaction of the message's context, "+
			"so the messages the handler returns would commit apart from its claim; pass the outbox's ContextPublisher()", pub)
	}
	cases := []struct {
		field string
		err   func() error
	}{
		{"middleware.Config.Idempotency." + notTransactional, func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: store, Idempotency: middleware.IdempotencyConfig{Outbox: box.ContextPublisher()}})
			return err
		}},
		{"middleware.Config.Idempotency." + notTransactional, func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, Idempotency: middleware.IdempotencyConfig{LockKeys: keys}})
			return err
		}},
		{"middleware.IdempotencyConfig." + notTransactional, func() error {
			_, err := middleware.Idempotency(memoryStore(t), middleware.IdempotencyConfig{Outbox: box.ContextPublisher()})
			return err
		}},
		{"middleware.IdempotencyConfig." + apart(box.AutoTxPublisher()), func() error {
			_, err := middleware.Idempotency(store, inTx(box.AutoTxPublisher()))
			return err
		}},
		{"middleware.IdempotencyConfig." + apart(box.Publisher(tx)), func() error {
			_, err := middleware.Idempotency(store, inTx(box.Publisher(tx)))
			return err
		}},
		{"middleware.IdempotencyConfig." + apart((*outbox.Publisher)(nil)), func() error {
			_, err := middleware.Idempotency(store, inTx((*outbox.Publisher)(nil)))
			return err
		}},
		{"middleware.IdempotencyConfig." + apart(pub), func() error {
			_, err := middleware.Idempotency(store, inTx(pub))
			return err
		}},
		{"middleware.Config.Idempotency." + apart(box.AutoTxPublisher()), func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: store, Idempotency: inTx(box.AutoTxPublisher())})
			return err
		}},
		{"middleware.Config.Idempotency." + apart(box.Publisher(tx)), func() error {
			_, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: store, Idempotency: inTx(box.Publisher(tx))})
			return err
		}},
	}
	for _, c := range cases {
		err := c.err()
		if !errors.Is(err, koto.ErrInvalidConfig) || !strings.Contains(err.Error(), "invalid configuration: "+c.field) {
			t.Errorf("%s: got %v, want ErrInvalidConfig naming it", c.field, err)
		}
	}
	// Key locks need no Outbox: the handler may publish through the
	// outbox's ContextPublisher itself.
	if _, err := middleware.Idempotency(store, middleware.IdempotencyConfig{Transactional: true, LockKeys: keys}); err != nil {
		t.Errorf("key locks without an outbox: %v", err)
	}
	if _, err := middleware.Defaults(middleware.Config{Publisher: pub, Store: store,
		Idempotency: middleware.IdempotencyConfig{Transactional: true, Outbox: box.ContextPublisher(), LockKeys: keys}}); err != nil {
		t.Errorf("Defaults with the transactional mode, an outbox and key locks: %v", err)
	}
}
