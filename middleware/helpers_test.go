package middleware_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// The metadata keys of a dead letter, as the package doc lists them.
const (
	dlReason            = "dead_letter_reason"
	dlErrorType         = "dead_letter_error_type"
	dlErrorClass        = "dead_letter_error_class"
	dlOriginalTopic     = "dead_letter_original_topic"
	dlOriginalPartition = "dead_letter_original_partition"
	dlOriginalOffset    = "dead_letter_original_offset"
	dlConsumerGroup     = "dead_letter_consumer_group"
	dlHandler           = "dead_letter_handler"
	dlAttempts          = "dead_letter_attempts"
	dlFailedAt          = "dead_letter_failed_at"
	dlDropped           = "dead_letter_dropped"
)

// fastBackoff keeps retries short in tests.
var fastBackoff = struct{ initial, max time.Duration }{5 * time.Millisecond, 50 * time.Millisecond}

// kafkaEnv is a Kafka broker with a publisher on it.
type kafkaEnv struct {
	brokers []string
	pub     *broker.Publisher
}

func newKafkaEnv(t *testing.T) *kafkaEnv {
	t.Helper()
	e := &kafkaEnv{brokers: kototest.Brokers(t)}
	e.pub = kototest.NewPublisher(t, e.config())
	return e
}

// config is the broker configuration of e.
func (e *kafkaEnv) config() broker.Config { return broker.Config{Brokers: e.brokers} }

// topic returns a new provisioned topic.
func (e *kafkaEnv) topic(t *testing.T, prefix string) string {
	t.Helper()
	return kototest.NewTopic(t, e.config(), prefix)
}

// provision creates topics, as an application does for its dead-letter
// topics.
func (e *kafkaEnv) provision(t *testing.T, names ...string) {
	t.Helper()
	kototest.Provision(t, e.config(), names...)
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
	router := kototest.NewRouter(t, nil)
	for _, s := range specs {
		e.addHandler(t, router, s)
	}
	return kototest.RunRouter(t, router)
}

// addHandler adds s to router. Nacked messages come back after 10 ms
// instead of the default 100 ms, to keep the tests short.
func (e *kafkaEnv) addHandler(t *testing.T, router *message.Router, s handlerSpec) {
	t.Helper()
	sub := kototest.NewSubscriber(t, broker.Config{Brokers: e.brokers, ConsumerGroup: s.name, NackResendSleep: 10 * time.Millisecond})
	var h *message.Handler
	if s.produce == nil {
		h = router.AddConsumerHandler(s.name, s.topic, sub, s.handle)
	} else {
		// The router closes a handler's publisher when it stops.
		pub := s.publisher
		if pub == nil {
			pub = kototest.NewPublisher(t, e.config())
		}
		h = router.AddHandler(s.name, s.topic, sub, s.publishTopic, pub, s.produce)
	}
	h.AddMiddleware(s.middlewares...)
}

// collect consumes n messages of topic in a fresh consumer group and acks
// them.
func (e *kafkaEnv) collect(t *testing.T, topic string, n int) []*message.Message {
	t.Helper()
	sub := kototest.NewSubscriber(t, broker.Config{Brokers: e.brokers, ConsumerGroup: kototest.Group(t, "collect")})
	defer sub.Close()
	return kototest.AckN(t, kototest.Subscribe(t, sub, topic), n)
}

// newMessages returns n messages with new UUIDs and JSON payloads
// {"n": i}; each message is its own partition key, so that a message
// republished with the same UUID lands on the same partition, as a Kafka
// redelivery would.
func newMessages(n int) []*message.Message {
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(`{"n":`+strconv.Itoa(i)+`}`))
		msgs[i].Metadata.Set(koto.PartitionKeyMetadataKey, msgs[i].UUID)
	}
	return msgs
}

// logCapture is a JSON slog logger whose lines a test can read back.
type logCapture struct{ kototest.Buffer }

func (c *logCapture) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// lines parses every line logged so far.
func (c *logCapture) lines(t *testing.T) []map[string]any {
	t.Helper()
	data := c.Bytes()
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

// dedup is the Idempotency middleware of a Defaults chain, innermost in
// it, with the chain, whose Close waits for the marks after an ack:
// Idempotency alone gives no handle on them.
type dedup struct {
	Middleware message.HandlerMiddleware
	chain      *middleware.Chain
}

// Close closes the chain.
func (d dedup) Close(ctx context.Context) error { return d.chain.Close(ctx) }

// newIdempotency is the Idempotency middleware with cfg, taken from a
// Defaults chain that the test closes when it ends.
func newIdempotency(t *testing.T, store idempotency.Store, cfg middleware.IdempotencyConfig) dedup {
	t.Helper()
	d, err := newDedup(store, cfg)
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

// newDedup is newIdempotency without the test's cleanup.
func newDedup(store idempotency.Store, cfg middleware.IdempotencyConfig) (dedup, error) {
	c, err := middleware.Defaults(middleware.Config{
		Publisher: gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{}), // dead letters, not used
		Store:     store, Idempotency: cfg, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return dedup{}, err
	}
	mws := c.Middlewares()
	return dedup{Middleware: mws[len(mws)-1], chain: c}, nil
}
