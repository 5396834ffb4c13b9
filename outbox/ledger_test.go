package outbox_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// TestLedgerEndToEnd: a transactional consumer with the outbox applies
// 2 000 messages to a ledger, each delivered twice (the copies on
// different partitions, so that they also meet concurrently), the first
// attempt of every tenth failing after its ledger row and its event are
// written. Each message publishes one event through the outbox: the even
// ones through ContextPublisher, the odd ones returned to the router. The
// ledger is exact (one row per message, no more, the exact sum), and Kafka
// has exactly one event per message, under one UUID: nothing of a failed
// attempt or of a duplicate got out, and nothing was dead-lettered.
func TestLedgerEndToEnd(t *testing.T) {
	total := 2000
	if testing.Short() {
		total = 400
	}
	e := newEnv(t)
	in, out := kototest.Topic(t, "payments-in"), kototest.Topic(t, "ledger-events")
	group := kototest.Group(t, "ledger")
	bcfg := broker.Config{Brokers: e.brokers, Provision: broker.ProvisionConfig{Partitions: 4}}
	kototest.Provision(t, bcfg, in, out, topics.DeadLetter(group))
	pgtest.Exec(t, e.pool, "CREATE TABLE "+e.schema+".ledger (id bigserial PRIMARY KEY, message_uuid text NOT NULL, amount bigint NOT NULL)")
	store := newStore(t, e)
	e.startForwarder(e.forwarderConfig())

	l := &ledgerConsumer{e: e, out: out, attempts: map[string]int{}}
	pub := kototest.NewPublisher(t, broker.Config{Brokers: e.brokers})
	stop := l.run(t, group, in, pub, store)
	defer stop()

	var sent []*message.Message
	var want int64
	for i := range total {
		msg := message.NewMessage(uuid.Must(uuid.NewV7()).String(), []byte(strconv.Itoa(i)))
		msg.Metadata.Set(koto.PartitionKeyMetadataKey, "first-"+strconv.Itoa(i))
		again := message.NewMessage(msg.UUID, msg.Payload)
		again.Metadata.Set(koto.PartitionKeyMetadataKey, "again-"+strconv.Itoa(i))
		sent = append(sent, msg, again)
		want += int64(i)
	}
	r := newReader(t, e.brokers, out)
	for chunk := range slices.Chunk(sent, 500) {
		if err := pub.Publish(in, chunk...); err != nil {
			t.Fatal(err)
		}
	}

	recs := r.distinct(total)
	kototest.WaitFor(t, "every delivery handled and the outbox empty", func() bool {
		return l.duplicates.Load() >= int64(total) && e.rows() == 0
	})
	recs = append(recs, r.drain(2*testPoll)...)
	stop()

	var rows, distinct, sum int64
	if err := e.pool.QueryRow(kototest.Context(t), "SELECT count(*), count(DISTINCT message_uuid), coalesce(sum(amount), 0) FROM "+e.schema+".ledger").
		Scan(&rows, &distinct, &sum); err != nil {
		t.Fatal(err)
	}
	if rows != int64(total) || distinct != int64(total) || sum != want {
		t.Errorf("ledger: %d rows of %d messages summing to %d; want %d, %d, %d", rows, distinct, sum, total, total, want)
	}
	events := map[string]string{} // event UUID → source message
	perSource := map[string]int{}
	for _, rec := range recs {
		if src, ok := events[rec.UUID]; ok {
			t.Fatalf("event %s (of %s) on Kafka twice", rec.UUID, src)
		}
		events[rec.UUID] = rec.Payload
		perSource[rec.Payload]++
	}
	for src, n := range perSource {
		if n != 1 {
			t.Errorf("message %s has %d events on Kafka, want 1", src, n)
		}
	}
	if len(perSource) != total {
		t.Errorf("%d messages have an event on Kafka, want %d", len(perSource), total)
	}
	if l.failed.Load() == 0 || l.duplicates.Load() < int64(total) {
		t.Errorf("%d failed first attempts and %d duplicates: the run did not exercise retries and duplicates", l.failed.Load(), l.duplicates.Load())
	}
	if n := recordsIn(t, e.brokers, topics.DeadLetter(group)); n != 0 {
		t.Errorf("%d dead letters", n)
	}
	t.Logf("%d messages, %d deliveries: %d first attempts failed, %d duplicates skipped, %d events forwarded",
		total, len(sent), l.failed.Load(), l.duplicates.Load(), len(recs))
}

// ledgerConsumer is the handler of TestLedgerEndToEnd.
type ledgerConsumer struct {
	e   *env
	out string

	mu       sync.Mutex
	attempts map[string]int // handler runs per message

	failed, duplicates atomic.Int64
}

var errFirstAttempt = errors.New("first attempt fails after writing")

// handle writes the ledger row and the event in the middleware's
// transaction, then fails if this is the first attempt of every tenth
// message.
func (l *ledgerConsumer) handle(msg *message.Message) ([]*message.Message, error) {
	ctx := msg.Context()
	tx, ok := postgres.TxFromContext(ctx)
	if !ok {
		return nil, koto.Poison(errors.New("no transaction in the handler's context"))
	}
	i, err := strconv.Atoi(string(msg.Payload))
	if err != nil {
		return nil, koto.Poison(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+l.e.schema+".ledger (message_uuid, amount) VALUES ($1, $2)", msg.UUID, i); err != nil {
		return nil, err
	}
	event := message.NewMessage(uuid.Must(uuid.NewV7()).String(), []byte(msg.UUID))
	var produced []*message.Message
	if i%2 == 0 {
		event.SetContext(ctx)
		if err := l.e.o.ContextPublisher().Publish(l.out, event); err != nil {
			return nil, err
		}
	} else {
		produced = append(produced, event)
	}
	l.mu.Lock()
	l.attempts[msg.UUID]++
	first := l.attempts[msg.UUID] == 1
	l.mu.Unlock()
	if first && i%10 == 0 {
		l.failed.Add(1)
		return produced, errFirstAttempt
	}
	return produced, nil
}

// run runs the consumer on a router until stop.
func (l *ledgerConsumer) run(t *testing.T, group, in string, pub message.Publisher, store *postgres.Store) (stop func()) {
	t.Helper()
	chain, err := middleware.Defaults(middleware.Config{
		Publisher: pub,
		Store:     store,
		Logger:    slog.New(slog.DiscardHandler), // 200 retries on purpose; the test checks the outcomes
		Idempotency: middleware.IdempotencyConfig{
			Transactional: true,
			Outbox:        l.e.o.ContextPublisher(),
			OnDuplicate:   func(*message.Message, string, string) { l.duplicates.Add(1) },
		},
		DeadLetter: middleware.DeadLetterConfig{Backoff: koto.Backoff{InitialInterval: time.Millisecond, MaxInterval: 20 * time.Millisecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	sub := kototest.NewSubscriber(t, broker.Config{Brokers: l.e.brokers, ConsumerGroup: group, NackResendSleep: 10 * time.Millisecond})
	router := kototest.NewRouter(t, nil)
	// The router's publisher is never used: the outbox takes what the
	// handler returns. It is a real one all the same.
	router.AddHandler(group, in, sub, l.out, kototest.NewPublisher(t, broker.Config{Brokers: l.e.brokers}), l.handle).AddMiddleware(chain.Middlewares()...)
	t.Cleanup(func() { // after the router's stop, registered below
		if err := chain.Close(context.Background()); err != nil {
			t.Errorf("chain close: %v", err)
		}
	})
	return kototest.RunRouter(t, router)
}

// recordsIn counts the records of topic that arrive within twice the poll
// interval.
func recordsIn(t *testing.T, brokers []string, topic string) int {
	t.Helper()
	return len(newReader(t, brokers, topic).drain(2 * testPoll))
}
