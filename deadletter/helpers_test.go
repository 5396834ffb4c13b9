package deadletter_test

import (
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/deadletter"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// env is a Kafka broker, a publisher on it, an original topic and a
// consumer group with its dead-letter topic, all new.
type env struct {
	brokers []string
	pub     *broker.Publisher
	topic   string // where the consumer reads
	group   string // the consumer group, also the handler name
	dlq     string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, kototest.Brokers(t))
}

func newEnvOn(t *testing.T, brokers []string) *env {
	t.Helper()
	e := &env{brokers: brokers, topic: kototest.Topic(t, "orders"), group: kototest.Group(t, "payments")}
	e.dlq = topics.DeadLetter(e.group)
	kototest.Provision(t, e.brokerConfig(), e.topic, e.dlq)
	e.pub = kototest.NewPublisher(t, e.brokerConfig())
	return e
}

func (e *env) brokerConfig() broker.Config { return broker.Config{Brokers: e.brokers} }

// queue opens the dead-letter queue of e.group; cfg's Broker and
// ConsumerGroup are filled in.
func (e *env) queue(t *testing.T, cfg deadletter.Config) *deadletter.Queue {
	t.Helper()
	cfg.Broker = e.brokerConfig()
	if cfg.ConsumerGroup == "" {
		cfg.ConsumerGroup = e.group
	}
	q, err := deadletter.NewQueue(cfg)
	if err != nil {
		t.Fatalf("NewQueue: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// publish sends one message per payload, with a cqrs type name; every
// second message has a partition key.
func (e *env) publish(t *testing.T, typeName string, payloads ...string) []string {
	t.Helper()
	var uuids []string
	for i, p := range payloads {
		msg := message.NewMessage(watermill.NewUUID(), []byte(p))
		msg.Metadata.Set(koto.TypeNameMetadataKey, typeName)
		if i%2 == 1 {
			msg.Metadata.Set(koto.PartitionKeyMetadataKey, "key-"+p)
		}
		if err := e.pub.Publish(e.topic, msg); err != nil {
			t.Fatalf("publish: %v", err)
		}
		uuids = append(uuids, msg.UUID)
	}
	return uuids
}

// consumer is a handler that fails with its bug until the bug is nil,
// then records the UUIDs it handles. Behind run's chain a failure is
// dead-lettered at once, whatever its class.
type consumer struct {
	mu         sync.Mutex
	bug        error
	handled    []string // in order, once per handler call that succeeded
	duplicates []string
}

func (c *consumer) setBug(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bug = err
}

func (c *consumer) handle(msg *message.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bug != nil {
		return c.bug
	}
	c.handled = append(c.handled, msg.UUID)
	return nil
}

func (c *consumer) onDuplicate(msg *message.Message, _, _ string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.duplicates = append(c.duplicates, msg.UUID)
}

func (c *consumer) snapshot() (handled, duplicates []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.handled), slices.Clone(c.duplicates)
}

// run starts a router with c as the handler of e.group on e.topic, behind
// middleware.Defaults with an in-memory idempotency store, and extra
// middleware first. It stops when the test ends.
func (e *env) run(t *testing.T, c *consumer, group string, extra ...message.HandlerMiddleware) {
	t.Helper()
	store := idempotency.NewMemoryStore(0)
	t.Cleanup(func() { _ = store.Close() })
	chain, err := middleware.Defaults(middleware.Config{
		Publisher:   e.pub,
		Store:       store,
		Logger:      slog.New(slog.DiscardHandler),
		DeadLetter:  middleware.DeadLetterConfig{MaxAttempts: 1}, // the first failure is dead-lettered
		Idempotency: middleware.IdempotencyConfig{OnDuplicate: c.onDuplicate},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the router's stop, registered below
		if err := chain.Close(kototest.Context(t)); err != nil {
			t.Errorf("chain close: %v", err)
		}
	})
	sub := kototest.NewSubscriber(t, broker.Config{Brokers: e.brokers, ConsumerGroup: group, NackResendSleep: 10 * time.Millisecond})
	router := kototest.NewRouter(t, nil)
	h := router.AddConsumerHandler(group, e.topic, sub, c.handle)
	h.AddMiddleware(append(extra, chain.Middlewares()...)...)
	kototest.RunRouter(t, router)
}

// waitForDeadLetters polls the queue until it lists n dead letters and
// returns them.
func waitForDeadLetters(t *testing.T, q *deadletter.Queue, n int) []*deadletter.Letter {
	t.Helper()
	var got []*deadletter.Letter
	kototest.WaitFor(t, "dead letters", func() bool {
		var err error
		got, err = q.List(kototest.Context(t), deadletter.Filter{})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		return len(got) >= n
	})
	if len(got) != n {
		t.Fatalf("%d dead letters, want %d", len(got), n)
	}
	return got
}

// replayedFromKey is the metadata key a replay adds to each message it
// sends, as the package doc names it.
const replayedFromKey = "dead_letter_replayed_from"

// records lists every record of topic, as a queue over it: a replay's
// copies have replayedFromKey.
func (e *env) records(t *testing.T, topic string) []*deadletter.Letter {
	t.Helper()
	q := e.queue(t, deadletter.Config{ConsumerGroup: "reader", Topic: topic})
	ls, err := q.List(kototest.Context(t), deadletter.Filter{})
	if err != nil {
		t.Fatalf("read %s: %v", topic, err)
	}
	return ls
}

// replayedUUIDs returns the UUIDs of the replayed copies on the original
// topic, once per copy.
func (e *env) replayedUUIDs(t *testing.T) []string {
	t.Helper()
	var uuids []string
	for _, l := range e.records(t, e.topic) {
		if l.Metadata.Get(replayedFromKey) != "" {
			uuids = append(uuids, l.UUID)
		}
	}
	slices.Sort(uuids)
	return uuids
}

// committed returns the offset group committed on a partition of e.topic,
// -1 when none.
func (e *env) committed(t *testing.T, group string, partition int32) int64 {
	t.Helper()
	adm, err := sarama.NewClusterAdmin(e.brokers, sarama.NewConfig())
	if err != nil {
		t.Fatalf("cluster admin: %v", err)
	}
	defer adm.Close()
	resp, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{e.topic: {partition}})
	if err != nil {
		t.Fatalf("offsets of %s: %v", group, err)
	}
	if block := resp.GetBlock(e.topic, partition); block != nil {
		return block.Offset
	}
	return -1
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

var errBug = errors.New("amount is negative")
