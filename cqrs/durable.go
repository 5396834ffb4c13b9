package cqrs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/koto-dev/watermill-koto/internal/config"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/parking"
)

// DurableOutboxConfig configures a DurableOutbox. Broker.Brokers is
// required; every other zero field means its default.
type DurableOutboxConfig struct {
	// Broker is the Kafka the forwarder produces to and the direct
	// publisher (requests, dead letters, replies) publishes to; it is also
	// the default Broker of the services and dispatchers the DurableOutbox
	// makes. Brokers is required.
	Broker broker.Config

	// Outbox names the outbox tables; default koto.outbox. They are
	// created by NewDurableOutbox unless DisableAutoCreateSchema is set.
	Outbox outbox.Config

	// Store configures the processed-messages store of the transactional
	// consumers; default koto.processed_messages, created by
	// NewDurableOutbox unless DisableAutoCreateSchema is set.
	Store postgres.Config

	// Forwarder tunes the forwarder. Leave its Broker zero: Broker is
	// used. Its Logger defaults to Logger; its Telemetry also receives the
	// parked messages' gauges.
	Forwarder outbox.ForwarderConfig

	// Parking names the table of the messages that the consumers of its
	// services park (middleware.ParkingConfig, set by
	// ServiceConfig.DeadLetter.Parking.Delays); default koto.parked,
	// created by NewDurableOutbox unless DisableAutoCreateSchema is set.
	Parking parking.Config

	// Logger receives the logs of the forwarder and of the direct
	// publisher. Default: slog.Default().
	Logger *slog.Logger
}

func (c *DurableOutboxConfig) setDefaults() {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Forwarder.Logger = cmp.Or(c.Forwarder.Logger, c.Logger)
}

// forwarderConfig is Forwarder with Broker.
func (c DurableOutboxConfig) forwarderConfig() outbox.ForwarderConfig {
	f := c.Forwarder
	f.Broker = c.Broker
	return f
}

// Validate reports every problem of the configuration, zero fields
// counting as their defaults, in one error that wraps koto.ErrInvalidConfig.
func (c DurableOutboxConfig) Validate() error {
	c.setDefaults()
	p := config.For("cqrs.DurableOutboxConfig")
	if len(c.Forwarder.Broker.Brokers) > 0 {
		p.Add("Forwarder.Broker", "is set; leave it zero and set Broker, which the forwarder uses")
	}
	p.Nest("Broker", c.Broker.Validate())
	p.Nest("Outbox", c.Outbox.Validate())
	p.Nest("Store", c.Store.Validate())
	p.Nest("Parking", c.Parking.Validate())
	// The forwarder runs on Broker, whose problems are reported once, above.
	f := c.Forwarder
	f.Broker = broker.Config{Brokers: []string{"127.0.0.1:9092"}}
	p.Nest("Forwarder", f.Validate())
	return p.Err()
}

// DurableOutbox is the durable outbox of one PostgreSQL database: an
// outbox table and its forwarder, the processed-messages store, and the
// facades of this package wired through them (see Durable outbox in the
// package doc). Make it with NewDurableOutbox at startup, one per database;
// close it after the router and the services and dispatchers it made, and
// before the pool.
type DurableOutbox struct {
	pool   *pgxpool.Pool
	cfg    DurableOutboxConfig
	box    *outbox.Outbox
	store  *postgres.Store
	parked *parking.Store
	direct *broker.Publisher // concrete: a nil one must compare nil in Close
	fwd    *outbox.Forwarder
	gauges metric.Registration // the parked messages'

	stop    context.CancelFunc
	stopped chan struct{}
	once    sync.Once

	connMu sync.Mutex
	conns  int // of the pool, that the transactional consumers of its services may hold
}

// spareConns are the pool's connections that no consumer may count on:
// the forwarder's backlog gauges and the store's cleanup take one each.
const spareConns = 2

// reserveConns counts n more connections that transactional consumers may
// hold at once, unless they do not fit the pool's MaxConns beside those
// counted before and spareConns; it returns those counted before and
// MaxConns either way.
func (d *DurableOutbox) reserveConns(n int) (before, maxConns int, ok bool) {
	maxConns = int(d.pool.Stat().MaxConns())
	d.connMu.Lock()
	defer d.connMu.Unlock()
	before = d.conns
	if before+n+spareConns > maxConns {
		return before, maxConns, false
	}
	d.conns += n
	return before, maxConns, true
}

// releaseConns uncounts n connections of reserveConns.
func (d *DurableOutbox) releaseConns(n int) {
	d.connMu.Lock()
	defer d.connMu.Unlock()
	d.conns -= n
}

// NewDurableOutbox sets up the durable outbox of pool's database: it
// creates (or, with DisableAutoCreateSchema, checks) the outbox tables and
// the processed-messages table, connects a direct publisher to Kafka, and
// starts the forwarder, which runs until Close. ctx bounds the setup only.
// A configuration it refuses gives an error that wraps koto.ErrInvalidConfig
// and names the field.
func NewDurableOutbox(ctx context.Context, pool *pgxpool.Pool, cfg DurableOutboxConfig) (_ *DurableOutbox, err error) {
	if pool == nil {
		return nil, config.Invalid("cqrs.NewDurableOutbox", "", "got a nil pool; pass the *pgxpool.Pool of the services' database")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &DurableOutbox{pool: pool, cfg: cfg, stopped: make(chan struct{})}
	defer func() {
		if err != nil {
			_ = d.Close()
		}
	}()
	if d.box, err = outbox.New(pool, cfg.Outbox); err != nil {
		return nil, err
	}
	if err := d.box.Setup(ctx); err != nil {
		return nil, fmt.Errorf("cqrs: durable outbox: %w", err)
	}
	if d.store, err = postgres.NewStore(pool, cfg.Store); err != nil {
		return nil, err
	}
	if err := d.store.EnsureSchema(ctx); err != nil {
		return nil, fmt.Errorf("cqrs: durable outbox: %w", err)
	}
	if err := d.setupParking(ctx); err != nil {
		return nil, err
	}
	pubCfg := cfg.Broker
	pubCfg.Logger = cmp.Or(pubCfg.Logger, cfg.Logger)
	if d.direct, err = broker.NewPublisher(pubCfg); err != nil {
		return nil, fmt.Errorf("cqrs: durable outbox: publisher: %w", err)
	}
	if d.fwd, err = outbox.NewForwarder(d.box, cfg.forwarderConfig()); err != nil {
		return nil, err
	}
	d.run()
	return d, nil
}

// run starts the forwarder on a goroutine that Close stops.
func (d *DurableOutbox) run() {
	ctx, cancel := context.WithCancel(context.Background())
	d.stop = cancel
	go func() {
		defer close(d.stopped)
		// Run returns an error only for a configuration, which Validate
		// has checked; it logs it too.
		_ = d.fwd.Run(ctx)
	}()
}

// setupParking makes the parking store, its table and its gauges.
func (d *DurableOutbox) setupParking(ctx context.Context) error {
	var err error
	if d.parked, err = parking.NewStore(d.pool, d.box, d.cfg.Parking); err != nil {
		return err
	}
	if err := d.parked.Setup(ctx); err != nil {
		return fmt.Errorf("cqrs: durable outbox: %w", err)
	}
	tel, err := telemetryOf(d.cfg.Forwarder.Telemetry)
	if err != nil {
		return err
	}
	d.gauges, err = d.parked.Observe(tel)
	return err
}

// Outbox returns the outbox: its Transact, its publishers and LockKeys.
func (d *DurableOutbox) Outbox() *outbox.Outbox { return d.box }

// Parking returns the store of the messages its services' consumers park:
// its Status, List, RunNow and DeadLetter.
func (d *DurableOutbox) Parking() *parking.Store { return d.parked }

// EventPublisher returns an EventPublisher that writes events into the
// outbox in the transaction of the context passed to Publish: inside
// Transact, or in a consumer of a Service made by Service. Without a
// transaction, Publish fails with an error wrapping
// outbox.ErrNoTransaction.
func (d *DurableOutbox) EventPublisher(cfg EventPublisherConfig) (*EventPublisher, error) {
	return NewEventPublisher(d.box.ContextPublisher(), cfg)
}

// CommandDispatcher returns a CommandDispatcher whose Send writes into the
// outbox in the transaction of its context, like EventPublisher's
// Publish, and whose Request publishes directly, since it waits for a
// reply that would not come before the transaction commits. A zero
// cfg.Broker means the DurableOutbox's.
func (d *DurableOutbox) CommandDispatcher(cfg CommandDispatcherConfig) (*CommandDispatcher, error) {
	if len(cfg.Broker.Brokers) == 0 {
		cfg.Broker = d.cfg.Broker
	}
	cfg.requestPublisher = d.direct
	return NewCommandDispatcher(d.box.ContextPublisher(), cfg)
}

// Service returns a Service whose idempotent consumers run in the
// transactional mode on the DurableOutbox's database: the claim, the
// handler's writes and what it publishes through the outbox commit
// together. Leave cfg.Store nil: Service uses the DurableOutbox's. A zero
// cfg.Broker means the DurableOutbox's; a nil Publisher (dead letters and
// replies), its direct publisher. With cfg.DeadLetter.Parking.Delays, its
// consumers park in the DurableOutbox's parking table unless
// Parking.Store names another.
func (d *DurableOutbox) Service(cfg ServiceConfig) (*Service, error) {
	if cfg.Store != nil {
		return nil, config.Invalid("cqrs.ServiceConfig", "Store", "is set; leave it nil: DurableOutbox.Service uses its own")
	}
	if len(cfg.Broker.Brokers) == 0 {
		cfg.Broker = d.cfg.Broker
	}
	if cfg.Publisher == nil {
		cfg.Publisher = d.direct
	}
	if len(cfg.DeadLetter.Parking.Delays) > 0 && cfg.DeadLetter.Parking.Store == nil {
		cfg.DeadLetter.Parking.Store = d.parked
	}
	cfg.Store, cfg.durable = d.store, d
	return NewService(cfg)
}

// Close stops the forwarder (the rows not forwarded yet wait in the table
// for the next forwarder of the database), then closes the direct
// publisher and the store. The pool stays open. Calling it twice is fine.
func (d *DurableOutbox) Close() error {
	var errs []error
	d.once.Do(func() {
		if d.stop != nil {
			d.stop()
			<-d.stopped
		}
		if d.fwd != nil {
			errs = append(errs, d.fwd.Close())
		}
		if d.gauges != nil {
			errs = append(errs, d.gauges.Unregister())
		}
		if d.direct != nil {
			errs = append(errs, d.direct.Close())
		}
		if d.store != nil {
			errs = append(errs, d.store.Close())
		}
	})
	return errors.Join(errs...)
}
