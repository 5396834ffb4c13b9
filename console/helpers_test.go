package console

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/deadletter"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/topics"
)

// world is what a console test looks at: two consumer groups whose
// handlers dead-lettered messages and then stopped, with lag left on the
// first, and an outbox table with a backlog and no forwarder.
type world struct {
	cfg       broker.Config
	orders    seeded // dead letters of two causes, and lag
	shipments seeded // a <script> payload among its dead letters
	pool      *pgxpool.Pool
	schema    string // of the outbox table
}

// seeded is a topic, the group that consumed it, and the UUIDs of its
// dead letters by the kind of payload that failed.
type seeded struct {
	topic, group string
	failed       map[string][]string
}

// The world's figures, which the tests expect the console to show.
const (
	ordersLag      = 4 // published after its consumer stopped
	outboxWaiting  = 6
	scriptPayload  = `<script>window.kotoXSS = 1</script>`
	negativeReason = "order <n>: amount -<n> is negative"
)

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{cfg: broker.Config{Brokers: kototest.Brokers(t)}}
	w.orders = seeded{topic: kototest.Topic(t, "orders"), group: kototest.Group(t, "payments"), failed: map[string][]string{}}
	w.shipments = seeded{topic: kototest.Topic(t, "shipments"), group: kototest.Group(t, "shipping"), failed: map[string][]string{}}
	kototest.Provision(t, w.cfg, w.orders.topic, w.shipments.topic, topics.DeadLetter(w.orders.group), topics.DeadLetter(w.shipments.group))
	pub := kototest.NewPublisher(t, w.cfg)
	for i := range 3 {
		w.orders.publish(t, pub, "negative", fmt.Sprintf(`{"kind":"negative","order":%d}`, 100+i))
	}
	for i := range 2 {
		w.orders.publish(t, pub, "sku", fmt.Sprintf(`{"kind":"sku","order":%d}`, 200+i))
	}
	w.shipments.publish(t, pub, "script", scriptPayload)
	w.shipments.publish(t, pub, "type", `{"weight":"heavy"}`)
	w.consume(t, pub)
	for range ordersLag {
		w.orders.publish(t, pub, "ok", `{"kind":"ok"}`)
	}
	w.pool = pgtest.Pool(t)
	w.schema = pgtest.Schema(t, w.pool)
	w.fillOutbox(t)
	return w
}

func (s *seeded) publish(t *testing.T, pub message.Publisher, kind, payload string) {
	t.Helper()
	msg := message.NewMessage(watermill.NewUUID(), []byte(payload))
	msg.Metadata.Set(koto.TypeNameMetadataKey, kind)
	if err := pub.Publish(s.topic, msg); err != nil {
		t.Fatal(err)
	}
	if kind != "ok" {
		s.failed[kind] = append(s.failed[kind], msg.UUID)
	}
}

// consume runs both groups' handlers until their dead letters are on
// Kafka and they committed every record of their topics, then stops
// them. Run again, it handles what was published since.
func (w *world) consume(t *testing.T, pub message.Publisher) {
	t.Helper()
	store := idempotency.NewMemoryStore(0)
	defer store.Close()
	chain, err := middleware.Defaults(middleware.Config{
		Publisher: pub, Store: store, Logger: slog.New(slog.DiscardHandler),
		DeadLetter: middleware.DeadLetterConfig{MaxAttempts: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	router := kototest.NewRouter(t, nil)
	for _, h := range []struct {
		s      seeded
		handle message.NoPublishHandlerFunc
	}{{w.orders, handleOrder}, {w.shipments, handleShipment}} {
		sub := kototest.NewSubscriber(t, broker.Config{Brokers: w.cfg.Brokers, ConsumerGroup: h.s.group})
		router.AddConsumerHandler(h.s.group, h.s.topic, sub, h.handle).AddMiddleware(chain.Middlewares()...)
	}
	stop := kototest.RunRouter(t, router)
	for _, s := range []seeded{w.orders, w.shipments} {
		n := int64(len(slices.Concat(slices.Collect(maps.Values(s.failed))...)))
		kototest.WaitFor(t, "dead letters of "+s.group, func() bool {
			return kototest.Records(t, w.cfg.Brokers, topics.DeadLetter(s.group)) == n
		})
		kototest.WaitCommitted(t, w.cfg.Brokers, s.group, s.topic, kototest.Records(t, w.cfg.Brokers, s.topic))
	}
	stop()
	if err := chain.Close(kototest.Context(t)); err != nil {
		t.Fatal(err)
	}
}

func handleOrder(msg *message.Message) error {
	var o struct {
		Kind  string `json:"kind"`
		Order int    `json:"order"`
	}
	if err := json.Unmarshal(msg.Payload, &o); err != nil {
		return koto.Poison(err)
	}
	switch o.Kind {
	case "negative":
		return koto.Poison(fmt.Errorf("order %d: amount -%d is negative", o.Order, o.Order*7))
	case "sku":
		return koto.Poison(fmt.Errorf("sku %q not found", fmt.Sprintf("sku-%d", o.Order)))
	}
	return nil
}

func handleShipment(msg *message.Message) error {
	var s struct {
		Weight int `json:"weight"`
	}
	if err := json.Unmarshal(msg.Payload, &s); err != nil {
		return koto.Poison(err)
	}
	return nil
}

// fillOutbox writes outboxWaiting rows that no forwarder takes, and
// schedules one message for tomorrow.
func (w *world) fillOutbox(t *testing.T) {
	t.Helper()
	box, err := outbox.New(w.pool, outbox.Config{Schema: w.schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Setup(kototest.Context(t)); err != nil {
		t.Fatal(err)
	}
	for range outboxWaiting {
		if err := box.AutoTxPublisher().Publish(w.orders.topic, message.NewMessage(watermill.NewUUID(), []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := box.AutoTxPublisher().ScheduleAfter(24*time.Hour, w.orders.topic, message.NewMessage(watermill.NewUUID(), []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
}

// console starts a console on w with cfg's other fields, served by a test
// server; both end with the test.
func (w *world) console(t *testing.T, cfg Config) (*Handler, *httptest.Server) {
	t.Helper()
	cfg.Broker, cfg.Pool, cfg.OutboxSchemas = w.cfg, w.pool, []string{w.schema}
	if cfg.Logger == nil {
		cfg.Logger = kototest.Logger(slog.LevelInfo)
	}
	cfg.SampleInterval = cmp.Or(cfg.SampleInterval, 250*time.Millisecond)
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		if err := h.Close(); err != nil {
			t.Errorf("console close: %v", err)
		}
	})
	return h, srv
}

// firstLetter returns the position, "partition/offset", of a dead letter
// of group.
func (w *world) firstLetter(t *testing.T, group string) string {
	t.Helper()
	q, err := deadletter.NewQueue(deadletter.Config{Broker: w.cfg, ConsumerGroup: group})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ls, err := q.List(kototest.Context(t), deadletter.Filter{Limit: 1})
	if err != nil || len(ls) == 0 {
		t.Fatalf("a dead letter of %s: %v %v", group, ls, err)
	}
	return fmt.Sprintf("%d/%d", ls[0].Partition, ls[0].Offset)
}

// replayed returns the UUIDs of the records a replay sent to topic, once
// per record.
func (w *world) replayed(t *testing.T, topic string) []string {
	t.Helper()
	q, err := deadletter.NewQueue(deadletter.Config{Broker: w.cfg, ConsumerGroup: kototest.Group(t, "reader"), Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ls, err := q.List(kototest.Context(t), deadletter.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for _, l := range ls {
		if l.Metadata.Get("dead_letter_replayed_from") != "" {
			uuids = append(uuids, l.UUID)
		}
	}
	slices.Sort(uuids)
	return uuids
}

// seedCloudEvents adds to w a topic of CloudEvents whose consumer sends
// its dead letters in the CloudEvents mapping too, so that they carry no
// Watermill UUID: two causes of one class, their dead letters interleaved
// in time, kinds "negative" and "sku" with the ce_ids of each.
func (w *world) seedCloudEvents(t *testing.T) seeded {
	t.Helper()
	s := seeded{topic: kototest.Topic(t, "invoices"), group: kototest.Group(t, "billing"), failed: map[string][]string{}}
	kototest.Provision(t, w.cfg, s.topic, topics.DeadLetter(s.group))
	ce, err := broker.NewCloudEventsMarshaler(broker.CloudEventsConfig{Source: "/billing"})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i, kind := range []string{"negative", "sku", "negative", "sku", "negative"} {
		id := watermill.NewUUID()
		recs = append(recs, &kgo.Record{Topic: s.topic, Key: []byte("billing"), Value: fmt.Appendf(nil, `{"kind":%q,"order":%d}`, kind, 300+i),
			Headers: []kgo.RecordHeader{{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_id", Value: []byte(id)},
				{Key: "ce_source", Value: []byte("/shop")}, {Key: "ce_type", Value: []byte("invoice-due")}}})
		s.failed[kind] = append(s.failed[kind], id)
	}
	kototest.Produce(t, w.cfg.Brokers, recs)
	cfg := broker.Config{Brokers: w.cfg.Brokers, Marshaler: ce}
	chain, err := middleware.Defaults(middleware.Config{
		Publisher: kototest.NewPublisher(t, cfg), Logger: slog.New(slog.DiscardHandler),
		DeadLetter: middleware.DeadLetterConfig{MaxAttempts: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConsumerGroup = s.group
	router := kototest.NewRouter(t, nil)
	router.AddConsumerHandler(s.group, s.topic, kototest.NewSubscriber(t, cfg), handleOrder).AddMiddleware(chain.Middlewares()...)
	stop := kototest.RunRouter(t, router)
	kototest.WaitFor(t, "dead letters of "+s.group, func() bool {
		return kototest.Records(t, w.cfg.Brokers, topics.DeadLetter(s.group)) == int64(len(recs))
	})
	kototest.WaitCommitted(t, w.cfg.Brokers, s.group, s.topic, int64(len(recs)))
	stop()
	if err := chain.Close(kototest.Context(t)); err != nil {
		t.Fatal(err)
	}
	return s
}
