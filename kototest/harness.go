package kototest

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// Option changes what [New] starts.
type Option func(*options)

type options struct {
	postgres bool
	proxy    bool
	sinks    []string
	timeout  time.Duration
	logLevel slog.Level
}

// WithoutPostgres starts the broker alone, for services that keep nothing
// in PostgreSQL: the test needs no database.
func WithoutPostgres() Option { return func(o *options) { o.postgres = false } }

// WithPostgresFaults connects the harness's pool through a proxy that
// [Harness.CutPostgres] cuts, to stage a database outage.
func WithPostgresFaults() Option { return func(o *options) { o.proxy = true } }

// Sinks names topics that nothing in the test consumes, whose records
// [Harness.Wait] does not wait for: events that other services read.
// Dead-letter topics (".dlq") and reply topics (".replies") are sinks
// already.
func Sinks(topics ...string) Option {
	return func(o *options) { o.sinks = append(o.sinks, topics...) }
}

// Timeout bounds each [Harness.Wait]. Default: [DefaultTimeout].
func Timeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// LogLevel is the level of [Harness.Logger], which writes to the test's
// log (t.Log) with go test -v and nowhere otherwise. Default: warn.
func LogLevel(l slog.Level) Option { return func(o *options) { o.logLevel = l } }

// Harness is one test's Kafka broker and PostgreSQL schema, and the router
// that runs the services under test. Build it with [New]; everything it
// starts stops when the test ends.
type Harness struct {
	t      testing.TB
	opts   options
	kafka  *embedded.Broker
	pool   *pgxpool.Pool
	proxy  *pgtest.Proxy
	schema string
	logger *slog.Logger
	router *message.Router
	track  *tracker
	admin  *kadm.Client

	mu      sync.Mutex
	closers []func()                    // after the router stops, last first
	passed  map[uuid.UUID]time.Duration // by Advance, for each scheduled message it saw waiting
}

// New starts, for t, an embedded Kafka broker and, unless
// [WithoutPostgres], a PostgreSQL schema of its own on the database at
// DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable),
// and a router whose handlers [Harness.Wait] follows. Without a database
// the test is skipped, or fails when the environment has CI=true. When the
// test ends the router stops, then what was given to [Harness.Defer], then
// the schema is dropped and the broker closed.
func New(t testing.TB, opts ...Option) *Harness {
	t.Helper()
	o := options{postgres: true, timeout: DefaultTimeout, logLevel: slog.LevelWarn}
	for _, opt := range opts {
		opt(&o)
	}
	h := &Harness{t: t, opts: o, logger: Logger(o.logLevel)}
	h.kafka = Embedded(t)
	h.admin = Admin(t, h.kafka.Addrs())
	if o.postgres {
		h.startPostgres()
	}
	t.Cleanup(h.stop) // before the pool's and the broker's, registered above
	h.track = newTracker()
	h.router = NewRouter(t, h.logger)
	h.router.AddMiddleware(h.track.middleware) // first: outermost, around every handler's own middleware
	return h
}

func (h *Harness) startPostgres() {
	if h.opts.proxy {
		h.pool, h.proxy = pgtest.ProxiedPool(h.t)
	} else {
		h.pool = pgtest.Pool(h.t)
	}
	h.schema = pgtest.Schema(h.t, h.pool)
}

// stop runs what Defer was given, once the router stopped (RunRouter's
// cleanup, registered after, runs before); the schema, the pool and the
// broker, whose cleanups were registered before, go after.
func (h *Harness) stop() {
	h.mu.Lock()
	closers := h.closers
	h.closers = nil
	h.mu.Unlock()
	for _, c := range slices.Backward(closers) {
		c()
	}
}

// Defer runs fn when the test ends, after the router stopped and before
// the database and the broker go: close a service, a DurableOutbox, a
// publisher there. The last deferred runs first.
func (h *Harness) Defer(fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closers = append(h.closers, fn)
}

// Broker returns the configuration of the test's broker, for every client
// the services under test build: publishers, subscribers, the outbox and
// the DurableOutbox. Its Logger is [Harness.Logger].
func (h *Harness) Broker() broker.Config {
	return broker.Config{Brokers: h.kafka.Addrs(), Logger: h.logger}
}

// Embedded returns the embedded broker, for faults the harness does not
// offer (its Cluster's controls).
func (h *Harness) Embedded() *embedded.Broker { return h.kafka }

// Pool returns the pool of the test's database; nil [WithoutPostgres].
func (h *Harness) Pool() *pgxpool.Pool { return h.pool }

// Schema returns the test's schema, which the test owns: give it to the
// store's, the outbox's and the services' configurations.
func (h *Harness) Schema() string { return h.schema }

// Logger returns the logger of the harness, for the services' configs.
func (h *Harness) Logger() *slog.Logger { return h.logger }

// Router returns the router that [Harness.Run] runs: register the
// services and handlers under test on it.
func (h *Harness) Router() *message.Router { return h.router }

// Run runs the router until the test ends, and returns once its handlers
// run. Register on a running router with the context of [Harness.Context].
func (h *Harness) Run() {
	h.t.Helper()
	RunRouter(h.t, h.router)
}

// Context returns a context that ends when the test does.
func (h *Harness) Context() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	return ctx
}
