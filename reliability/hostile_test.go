package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/topics"
)

// hostileMaxBytes is max.message.bytes of the hostile scenario's topics,
// small so that records at and past it stay cheap.
const hostileMaxBytes = 64 << 10

// The dead-letter metadata that the middleware package doc lists.
const (
	dlReason         = "dead_letter_reason"
	dlErrorClass     = "dead_letter_error_class"
	dlOriginalOffset = "dead_letter_original_offset"
	dlDropped        = "dead_letter_dropped"
)

// hostileRecord is one record a foreign producer writes, and whether the
// consumer's handler accepts it.
type hostileRecord struct {
	name    string
	rec     *kgo.Record
	good    bool
	dropped bool // its dead letter is too large: sent without payload
}

// hostileOrder is what the scenario's handler decodes.
type hostileOrder struct {
	ID string `json:"id"`
}

// hostileRecords are the records of TestHostileRecords, in the order they
// are produced: good ones around and between every kind of garbage.
func hostileRecords() []hostileRecord {
	good := func(id string, headers ...kgo.RecordHeader) *kgo.Record {
		return &kgo.Record{Value: []byte(`{"id":"` + id + `"}`), Headers: headers}
	}
	binary := hostileNoise(4096)
	// The UUIDs differ: one UUID is one message to the idempotency check.
	badUTF8 := func(id string) []kgo.RecordHeader {
		return []kgo.RecordHeader{
			{Key: "\xff\xfe", Value: []byte("\xc3\x28")},
			{Key: "correlation_id", Value: []byte("\xff\x00\xed\xa0\x80")},
			{Key: "_watermill_message_uuid", Value: []byte("\x00\xff not a uuid " + id)},
			{Key: "", Value: nil},
			{Key: "partition_key", Value: []byte("\xc0")},
		}
	}
	many := make([]kgo.RecordHeader, 3000)
	for i := range many {
		many[i] = kgo.RecordHeader{Key: "h-" + strconv.Itoa(i), Value: []byte("v")}
	}
	return []hostileRecord{
		{name: "good before", rec: good("good-0"), good: true},
		{name: "empty value", rec: &kgo.Record{}},
		{name: "empty JSON object", rec: &kgo.Record{Value: []byte(`{}`)}},
		{name: "binary payload", rec: &kgo.Record{Key: binary[:16], Value: binary}},
		{name: "invalid UTF-8 headers, good payload", rec: good("good-1", badUTF8("1")...), good: true},
		{name: "invalid UTF-8 headers, binary payload", rec: &kgo.Record{Value: []byte("\x00\xff"), Headers: badUTF8("2")}},
		{name: "3000 headers, good payload", rec: good("good-2", many...), good: true},
		{name: "3000 headers, bad payload", rec: &kgo.Record{Value: []byte(`{"id":`), Headers: many}},
		{name: "poison near the size limit", rec: &kgo.Record{Value: hostileNoise(hostileMaxBytes - 512)}, dropped: true},
		{name: "good after", rec: good("good-3"), good: true},
	}
}

// TestHostileRecords has a foreign producer (franz-go) write garbage onto
// a topic that a handler behind middleware.Defaults consumes: empty,
// binary, invalid UTF-8 headers, thousands of headers, a poison record
// close to the topic's size limit, and records too large for it. Every
// record the handler rejects reaches the dead-letter topic with its reason
// and its headers intact, every good one is handled once, including the
// one after the garbage (the partition is not blocked), and nothing
// crashes. The poison record near the limit, whose dead letter Kafka
// refuses as too large, is dead-lettered without its payload, saying so; a record too large is refused to its producer, the franz-go
// client and the project's Publisher alike, with an error that says so.
func TestHostileRecords(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		store := idempotency.NewMemoryStore(idempotency.DefaultWindow)
		t.Cleanup(func() { _ = store.Close() })
		hostileRecordsWith(t, middleware.Config{Store: store})
	})
	t.Run("postgres-transactional", func(t *testing.T) {
		pool := pgtest.Pool(t)
		store, err := postgres.NewStore(pool, postgres.Config{Schema: pgtest.Schema(t, pool), CleanupInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		hostileRecordsWith(t, middleware.Config{Store: store, Idempotency: middleware.IdempotencyConfig{Transactional: true}})
	})
}

// hostileRecordsWith runs TestHostileRecords with the store and mode of cfg.
func hostileRecordsWith(t *testing.T, cfg middleware.Config) {
	brokers := kototest.Brokers(t)
	ctx := kototest.Context(t)
	topic, dlq := kototest.Topic(t, "hostile"), kototest.Topic(t, "hostile-dlq")
	limit := strconv.Itoa(hostileMaxBytes)
	created, err := kototest.Admin(t, brokers).CreateTopics(ctx, 1, 1, map[string]*string{"max.message.bytes": &limit}, topic, dlq)
	if err == nil {
		err = created.Error()
	}
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}

	records := hostileRecords()
	handled := hostileRun(t, brokers, topic, dlq, cfg)

	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerBatchMaxBytes(4*hostileMaxBytes))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for _, r := range records {
		r.rec.Topic = topic
		if err := client.ProduceSync(ctx, r.rec).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", r.name, err)
		}
	}
	tooLarge := hostileTooLarge(t, ctx, client, brokers, topic)

	var poison []hostileRecord
	for _, r := range records {
		if !r.good {
			poison = append(poison, r)
		}
	}
	letters := hostileLetters(t, brokers, dlq, len(poison))
	kototest.WaitFor(t, "the good records after the garbage to be handled", func() bool { return handled.Get("good-3") > 0 })

	losses, dups := 0, 0
	for _, r := range records {
		if !r.good {
			continue
		}
		var o hostileOrder
		_ = json.Unmarshal(r.rec.Value, &o)
		switch n := handled.Get(o.ID); {
		case n == 0:
			losses++
			t.Errorf("%s: never handled", r.name)
		case n > 1:
			dups += n - 1
			t.Errorf("%s: handled %d times", r.name, n)
		}
	}
	for _, r := range poison {
		l, ok := letters[r.rec.Offset]
		if !ok {
			losses++
			t.Errorf("%s (offset %d): no dead letter", r.name, r.rec.Offset)
			continue
		}
		hostileCheckLetter(t, r, l)
	}
	record(t, row{
		Checks:   "poison → dead letter with reason and headers intact; good handled once; no blocked partition",
		Faults:   "empty, binary, invalid UTF-8 headers, 3000 headers, poison near the size limit, records past it",
		Messages: len(records) + tooLarge, Duplicates: dups, Losses: losses,
		Note: fmt.Sprintf("%d dead letters (%d sent without payload: too large with the dead-letter metadata); %d records past the limit refused with MESSAGE_TOO_LARGE",
			len(letters), hostileDropped(letters), tooLarge),
	})
}

// hostileRun runs a router whose handler, behind middleware.Defaults
// with cfg's store and mode, decodes orders from topic and rejects what
// does not decode as poison; it returns the handled orders' counts by ID.
func hostileRun(t *testing.T, brokers []string, topic, dlq string, cfg middleware.Config) *kototest.Counter {
	handled := &kototest.Counter{}
	cfg.Publisher = kototest.NewPublisher(t, broker.Config{Brokers: brokers})
	cfg.Logger = kototest.Logger(slog.LevelError + 1)
	cfg.DeadLetter.Topic = dlq
	chain, err := middleware.Defaults(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := chain.Close(context.Background()); err != nil {
			t.Errorf("chain close: %v", err)
		}
	})
	router := kototest.NewRouter(t, nil)
	sub := kototest.NewSubscriber(t, broker.Config{Brokers: brokers, ConsumerGroup: kototest.Group(t, "hostile"),
		NackResendSleep: 10 * time.Millisecond})
	router.AddConsumerHandler("hostile-consumer", topic, sub, func(msg *message.Message) error {
		var o hostileOrder
		if err := json.Unmarshal(msg.Payload, &o); err != nil {
			return koto.Poison(fmt.Errorf("decoding an order: %w", err))
		}
		if o.ID == "" {
			return koto.Poison(errors.New("order without id"))
		}
		handled.Add(o.ID)
		return nil
	}).AddMiddleware(chain.Middlewares()...)
	kototest.RunRouter(t, router)
	return handled
}

// hostileTooLarge produces records past the topic's limit, with franz-go
// and with the project's Publisher, checks that each is refused with an
// error that says it is too large, and returns how many it tried.
func hostileTooLarge(t *testing.T, ctx context.Context, client *kgo.Client, brokers []string, topic string) int {
	huge := hostileNoise(hostileMaxBytes + 1)
	err := client.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: huge}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("franz-go produce of %d bytes: %v; want MESSAGE_TOO_LARGE", len(huge), err)
	}
	pub := kototest.NewPublisher(t, broker.Config{Brokers: brokers})
	err = pub.Publish(topic, message.NewMessage("0190c5a4-9d7e-7000-8000-0000000000aa", huge))
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("too large")) {
		t.Errorf("Publisher.Publish of %d bytes: %v; want an error that says it is too large", len(huge), err)
	}
	return 2
}

// hostileDropped counts the letters sent without their payload.
func hostileDropped(letters map[int64]*message.Message) int {
	n := 0
	for _, l := range letters {
		if l.Metadata.Get(dlDropped) != "" {
			n++
		}
	}
	return n
}

// hostileNoise returns n bytes that no codec compresses, so that a
// record's size on the wire is its size.
func hostileNoise(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(b)
	return b
}

// hostileLetters reads n dead letters of dlq, keyed by original offset.
func hostileLetters(t *testing.T, brokers []string, dlq string, n int) map[int64]*message.Message {
	var mu sync.Mutex
	letters := map[int64]*message.Message{}
	kototest.Watch(t, brokers, dlq, func(m *message.Message) {
		off, _ := strconv.ParseInt(m.Metadata.Get(dlOriginalOffset), 10, 64)
		mu.Lock()
		letters[off] = m
		mu.Unlock()
	})
	deadline := time.Now().Add(kototest.DefaultTimeout)
	for time.Now().Before(deadline) {
		mu.Lock()
		got := len(letters)
		mu.Unlock()
		if got >= n {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	return letters
}

// hostileCheckLetter checks that l is the dead letter of r: its payload,
// every header of r, a reason and the poison class.
func hostileCheckLetter(t *testing.T, r hostileRecord, l *message.Message) {
	t.Helper()
	if l.Metadata.Get(dlReason) == "" || l.Metadata.Get(dlErrorClass) != koto.ClassPoison.String() {
		t.Errorf("%s: dead letter reason %q class %q; want a reason and class poison", r.name,
			l.Metadata.Get(dlReason), l.Metadata.Get(dlErrorClass))
	}
	dropped := l.Metadata.Get(dlDropped)
	if r.dropped {
		if dropped == "" || len(l.Payload) != 0 {
			t.Errorf("%s: dead letter of %d bytes, dropped %q; want one without payload that says why", r.name, len(l.Payload), dropped)
		}
		return
	}
	if dropped != "" {
		t.Errorf("%s: dead letter dropped its payload: %s", r.name, dropped)
	}
	if !bytes.Equal(l.Payload, r.rec.Value) {
		t.Errorf("%s: dead letter payload differs (%d bytes, want %d)", r.name, len(l.Payload), len(r.rec.Value))
	}
	last := map[string]string{}
	for _, h := range r.rec.Headers {
		last[h.Key] = string(h.Value)
	}
	for k, v := range last {
		if k == "_watermill_message_uuid" {
			if l.UUID != v {
				t.Errorf("%s: dead letter UUID %q, want %q", r.name, l.UUID, v)
			}
		} else if l.Metadata.Get(k) != v && !(k == "correlation_id" && v == "") {
			t.Errorf("%s: dead letter header %q = %q, want %q", r.name, k, l.Metadata.Get(k), v)
		}
	}
}

// hostileNames are schema and table names written to inject SQL, or in
// scripts and shapes that naive quoting gets wrong. Each must be taken as
// one literal identifier; victim is a schema whose table y they aim at.
func hostileNames(victim string) []string {
	return []string{
		`x"; DROP SCHEMA ` + victim + ` CASCADE; --`,
		`x'); DROP TABLE ` + victim + `.y; --`,
		`"` + victim + `"."y"`,
		`a"b""c`,
		`注文 ☃ Ωmega`,
		`koto; SELECT pg_sleep(0)`,
		strings.Repeat("é", 31), // 62 bytes: fits
	}
}

// TestHostileNames gives the idempotency store and the outbox schema and
// table names that try to inject SQL, unicode, quotes and names past
// PostgreSQL's 63-byte limit (counted in bytes, not characters). Each name
// is either refused at construction with an error that names the field and
// says what to change, or used as one quoted identifier that works: the
// store marks and finds a key, the outbox takes a message. Afterwards the
// database holds exactly the schemas the accepted names made, and the
// victim's table is still there. Topic names that Kafka refuses are refused
// by the Publisher too, before they reach the broker.
func TestHostileNames(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := kototest.Context(t)
	victim := pgtest.Schema(t, pool)
	pgtest.Exec(t, pool, "CREATE TABLE "+victim+".y (id int)")
	before := hostileSchemas(t, pool)

	accepted := 0
	for _, name := range hostileNames(victim) {
		t.Cleanup(func() { pgtest.DropSchema(t, pool, name) })
		store, err := postgres.NewStore(pool, postgres.Config{Schema: name, Table: hostileCut("store "+name, 47), CleanupInterval: -1})
		if err != nil {
			t.Fatalf("idempotency store on %q: %v", name, err)
		}
		key := "0190c5a4-9d7e-7000-8000-0000000000b1"
		if err := store.MarkProcessed(ctx, key); err != nil {
			t.Fatalf("store on %q: mark: %v", name, err)
		}
		if ok, err := store.IsProcessed(ctx, key); err != nil || !ok {
			t.Fatalf("store on %q: IsProcessed = %v, %v; want true", name, ok, err)
		}
		store.Close()

		ob, err := outbox.New(pool, outbox.Config{Schema: name, Table: hostileCut("outbox "+name, 53)})
		if err != nil {
			t.Fatalf("outbox on %q: %v", name, err)
		}
		if err := ob.Setup(ctx); err != nil {
			t.Fatalf("outbox on %q: Setup: %v", name, err)
		}
		if err := ob.Transact(ctx, func(_ context.Context, tx pgx.Tx) error {
			return ob.Publisher(tx).Publish("orders", message.NewMessage(key, []byte(name)))
		}); err != nil {
			t.Fatalf("outbox on %q: publish: %v", name, err)
		}
		if n := pgtest.QueryInt(t, pool, "SELECT count(*) FROM "+ob.Table()); n != 1 {
			t.Fatalf("outbox table %s holds %d rows, want 1", ob.Table(), n)
		}
		accepted++
	}

	rejected := 0
	for _, c := range []struct{ name, hint string }{
		{strings.Repeat("é", 32), "is 64 bytes; shorten it"}, // 32 characters
		{"x\x00; DROP TABLE y", "NUL"},
		{"\xff\xfe", "UTF-8"},
	} {
		for what, err := range map[string]error{
			"store schema":  hostileStoreErr(pool, postgres.Config{Schema: c.name}),
			"store table":   hostileStoreErr(pool, postgres.Config{Table: c.name}),
			"outbox schema": hostileOutboxErr(pool, outbox.Config{Schema: c.name}),
			"outbox table":  hostileOutboxErr(pool, outbox.Config{Table: c.name}),
		} {
			if err == nil || !strings.Contains(err.Error(), c.hint) {
				t.Errorf("%s %q: %v; want an error at construction saying %q", what, c.name, err, c.hint)
				continue
			}
			rejected++
		}
	}

	rejected += hostileTopicNames(t)

	// Other tests create schemas meanwhile; a name read as SQL would make
	// one named after a piece of it.
	after := hostileSchemas(t, pool)
	extra := 0
	for s := range after {
		if !before[s] && !slices.Contains(hostileNames(victim), s) && slices.ContainsFunc(hostileNames(victim), func(n string) bool {
			return strings.Contains(n, s)
		}) {
			extra++
			t.Errorf("schema %q appeared: a name was read as SQL", s)
		}
	}
	if !after[victim] || pgtest.QueryInt(t, pool, "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = 'y'", victim) != 1 {
		t.Fatalf("schema %s or its table y was dropped: a name was read as SQL", victim)
	}
	record(t, row{
		Checks:   "hostile schema/table names quoted and working, or refused at construction; no schema added or dropped; invalid topics refused before Kafka",
		Faults:   "SQL injection, quotes, unicode, NUL, invalid UTF-8, names past 63 bytes; topics with ; / .. unicode, 250 bytes",
		Messages: accepted, Losses: extra,
		Note: fmt.Sprintf("%d names used quoted by the store and the outbox; %d refusals with a clear error", accepted, rejected),
	})
}

// hostileCut cuts name to at most n bytes, at a character boundary.
func hostileCut(name string, n int) string {
	for len(name) > n {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
}

// hostileTopicNames publishes to topic names that Kafka refuses (the
// embedded broker would create them) and checks that the Publisher
// refuses each with topics.ErrInvalid before anything reaches Kafka: no
// such topic exists afterwards. It returns how many it refused.
func hostileTopicNames(t *testing.T) int {
	brokers := kototest.Brokers(t)
	pub := kototest.NewPublisher(t, broker.Config{Brokers: brokers})
	names := []string{"x; DROP TOPIC y", "orders/placed", "注文", "..", "", strings.Repeat("t", 250), "a\x00b"}
	refused := 0
	for _, topic := range names {
		err := pub.Publish(topic, message.NewMessage("0190c5a4-9d7e-7000-8000-0000000000c1", []byte("x")))
		if !errors.Is(err, topics.ErrInvalid) {
			t.Errorf("Publish to topic %q: %v; want an error wrapping topics.ErrInvalid", topic, err)
			continue
		}
		refused++
	}
	listed, err := kototest.Admin(t, brokers).ListTopics(kototest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range names {
		if listed.Has(topic) {
			t.Errorf("topic %q was created", topic)
		}
	}
	return refused
}

func hostileStoreErr(pool *pgxpool.Pool, cfg postgres.Config) error {
	cfg.CleanupInterval = -1
	s, err := postgres.NewStore(pool, cfg)
	if err == nil {
		s.Close()
	}
	return err
}

func hostileOutboxErr(pool *pgxpool.Pool, cfg outbox.Config) error {
	_, err := outbox.New(pool, cfg)
	return err
}

// hostileSchemas returns the names of the database's schemas.
func hostileSchemas(t *testing.T, pool *pgxpool.Pool) map[string]bool {
	t.Helper()
	rows, err := pool.Query(kototest.Context(t), "SELECT nspname FROM pg_namespace")
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	return set
}
