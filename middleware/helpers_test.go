package middleware_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/internal/kafkatest"
	"github.com/koto-dev/watermill-koto/internal/pgtest"
	"github.com/koto-dev/watermill-koto/internal/tcpproxy"
	"github.com/koto-dev/watermill-koto/middleware"
)

// waitTimeout bounds every wait in these tests; a healthy run needs a
// fraction of it.
const waitTimeout = 60 * time.Second

// fastBackoff keeps retries short in tests.
var fastBackoff = struct{ initial, max time.Duration }{5 * time.Millisecond, 50 * time.Millisecond}

// kafkaEnv is a Kafka broker with a publisher on it.
type kafkaEnv struct {
	brokers []string
	pub     *broker.Publisher
}

func newKafkaEnv(t *testing.T) *kafkaEnv {
	t.Helper()
	e := &kafkaEnv{brokers: kafkatest.Brokers(t)}
	e.pub = e.newPublisher(t)
	t.Cleanup(func() { _ = e.pub.Close() })
	return e
}

// newPublisher returns a new Kafka publisher; the caller closes it.
func (e *kafkaEnv) newPublisher(t *testing.T) *broker.Publisher {
	t.Helper()
	pub, err := broker.NewPublisher(broker.Config{Brokers: e.brokers}, nil)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	return pub
}

// topic returns a new provisioned topic.
func (e *kafkaEnv) topic(t *testing.T, prefix string) string {
	t.Helper()
	name := kafkatest.Topic(t, prefix)
	e.provision(t, name)
	return name
}

// provision creates topics, as an application does for its dead-letter
// topics.
func (e *kafkaEnv) provision(t *testing.T, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := broker.ProvisionTopics(ctx, broker.Config{Brokers: e.brokers}, names...); err != nil {
		t.Fatalf("provision %v: %v", names, err)
	}
}

// memoryStore returns an in-memory store closed when the test ends.
func memoryStore(t *testing.T) *idempotency.MemoryStore {
	t.Helper()
	s := idempotency.NewMemoryStore(0)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (e *kafkaEnv) publish(t *testing.T, topic string, msgs ...*message.Message) {
	t.Helper()
	if err := e.pub.Publish(topic, msgs...); err != nil {
		t.Fatalf("publish to %s: %v", topic, err)
	}
}

// handlerSpec is one handler of a test router. Its name is also its
// consumer group, as the project's convention has it. With produce set, the
// messages it returns are published to publishTopic, with publisher or, when
// it is nil, a new Kafka publisher.
type handlerSpec struct {
	name         string
	topic        string
	middlewares  []message.HandlerMiddleware
	handle       message.NoPublishHandlerFunc
	produce      message.HandlerFunc
	publishTopic string
	publisher    message.Publisher
}

// runRouter starts a router with the given handlers and returns a function
// that closes it and waits for it to stop; the test's cleanup calls it too.
func (e *kafkaEnv) runRouter(t *testing.T, specs ...handlerSpec) (stop func()) {
	t.Helper()
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 30 * time.Second}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		e.addHandler(t, router, s)
	}
	return kafkatest.RunRouter(t, router)
}

// addHandler adds s to router. Nacked messages come back after 10 ms
// instead of the default 100 ms, to keep the tests short.
func (e *kafkaEnv) addHandler(t *testing.T, router *message.Router, s handlerSpec) {
	t.Helper()
	sub, err := broker.NewSubscriber(broker.Config{Brokers: e.brokers, ConsumerGroup: s.name, NackResendSleep: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatalf("NewSubscriber: %v", err)
	}
	var h *message.Handler
	if s.produce == nil {
		h = router.AddConsumerHandler(s.name, s.topic, sub, s.handle)
	} else {
		// The router closes a handler's publisher when it stops.
		pub := s.publisher
		if pub == nil {
			pub = e.newPublisher(t)
		}
		h = router.AddHandler(s.name, s.topic, sub, s.publishTopic, pub, s.produce)
	}
	h.AddMiddleware(s.middlewares...)
}

// collect consumes n messages of topic in a fresh consumer group and acks
// them.
func (e *kafkaEnv) collect(t *testing.T, topic string, n int) []*message.Message {
	t.Helper()
	sub, err := broker.NewSubscriber(broker.Config{Brokers: e.brokers, ConsumerGroup: kafkatest.Group(t, "collect")}, nil)
	if err != nil {
		t.Fatalf("NewSubscriber: %v", err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ch, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatalf("subscribe %s: %v", topic, err)
	}
	var got []*message.Message
	for len(got) < n {
		select {
		case m := <-ch:
			m.Ack()
			got = append(got, m)
		case <-ctx.Done():
			t.Fatalf("%s: got %d messages, want %d", topic, len(got), n)
		}
	}
	return got
}

func (e *kafkaEnv) admin(t *testing.T) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...))
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// records returns how many records topic holds, over all partitions; 0
// when it does not exist.
func (e *kafkaEnv) records(t *testing.T, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ends, err := e.admin(t).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return n
}

// newMessages returns n messages with new UUIDs and JSON payloads
// {"n": i}; each message is its own partition key, so that a message
// republished with the same UUID lands on the same partition, as a Kafka
// redelivery would.
func newMessages(n int) []*message.Message {
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(`{"n":`+strconv.Itoa(i)+`}`))
		msgs[i].Metadata.Set(broker.PartitionKeyMetadataKey, msgs[i].UUID)
	}
	return msgs
}

// republish returns a new message with the UUID, payload and metadata of m.
func republish(m *message.Message) *message.Message {
	c := message.NewMessage(m.UUID, m.Payload)
	for k, v := range m.Metadata {
		c.Metadata.Set(k, v)
	}
	return c
}

// waitFor is kafkatest.WaitFor.
func waitFor(t *testing.T, what string, cond func() bool) { kafkatest.WaitFor(t, what, cond) }

// counter counts calls per key.
type counter struct {
	mu sync.Mutex
	m  map[string]int
}

func newCounter() *counter { return &counter{m: map[string]int{}} }

func (c *counter) add(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key]++
	return c.m[key]
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

// distinct returns how many keys were counted.
func (c *counter) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// total returns the sum of all counts.
func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.m {
		n += v
	}
	return n
}

// logCapture is a JSON slog logger whose lines a test can read back.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *logCapture) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// lines parses every line logged so far.
func (c *logCapture) lines(t *testing.T) []map[string]any {
	t.Helper()
	c.mu.Lock()
	data := append([]byte(nil), c.buf.Bytes()...)
	c.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, sc.Text())
		}
		out = append(out, line)
	}
	return out
}

// where returns the lines whose field key equals value.
func where(lines []map[string]any, key string, value any) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l[key] == value {
			out = append(out, l)
		}
	}
	return out
}

// proxiedPool is pgtest.ProxiedPool: a pool that reaches PostgreSQL through
// a TCP proxy the test can cut.
func proxiedPool(t *testing.T) (*pgxpool.Pool, *tcpproxy.Proxy) {
	t.Helper()
	return pgtest.ProxiedPool(t)
}

// defaultsChain is middleware.Defaults(cfg), whose chain is closed when the
// test ends: after the router, whose stop runRouter registers later.
func defaultsChain(t *testing.T, cfg middleware.Config) []message.HandlerMiddleware {
	t.Helper()
	c, err := middleware.Defaults(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("chain close: %v", err)
		}
	})
	return c.Middlewares()
}

// newIdempotency is middleware.NewIdempotency, closed when the test ends.
func newIdempotency(t *testing.T, store idempotency.Store, cfg middleware.IdempotencyConfig) *middleware.IdempotentConsumer {
	t.Helper()
	d, err := middleware.NewIdempotency(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(context.Background()); err != nil {
			t.Errorf("idempotency close: %v", err)
		}
	})
	return d
}
