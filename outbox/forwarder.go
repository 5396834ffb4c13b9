package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/koto-dev/watermill-koto/internal/retry"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/internal/config"

	"go.opentelemetry.io/otel/metric"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/telemetry"
)

// forwarderGroup is the consumer group under which the forwarder keeps its
// position in the offsets table.
const forwarderGroup = "koto_outbox_forwarder"

// Forwarder moves committed rows of an outbox table to Kafka and deletes
// them. Run it in every instance of a service: one at a time is active per
// table, the others stand by and take over when it stops (see the package
// documentation). Make it with NewForwarder, stop it with Close.
type Forwarder struct {
	o   *Outbox
	cfg ForwarderConfig
	log *slog.Logger
	sql forwarderSQL
	tel *telemetry.Telemetry

	mu       sync.Mutex
	running  bool
	closed   bool
	cancel   context.CancelFunc
	done     chan struct{}
	observed metric.Registration // the backlog gauges, while Run runs

	producer *broker.Producer // used by Run's goroutine only

	active    atomic.Bool
	forwarded atomic.Int64
}

// NewForwarder returns a Forwarder for o's table that produces to
// cfg.Broker. It validates cfg (errors wrap ErrInvalidConfig) and connects
// to nothing: Run does.
func NewForwarder(o *Outbox, cfg ForwarderConfig) (*Forwarder, error) {
	if o == nil {
		return nil, config.Invalid("outbox.NewForwarder", "", "got a nil *Outbox; pass the one from outbox.New")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tel := cfg.Telemetry
	if tel == nil {
		var err error
		if tel, err = telemetry.New(telemetry.Config{}); err != nil {
			return nil, fmt.Errorf("outbox: %w", err)
		}
	}
	return &Forwarder{
		o:   o,
		cfg: cfg,
		log: cfg.Logger.With(slog.String("outbox", o.t.outbox)),
		sql: newForwarderSQL(o.t, cfg.BatchSize),
		tel: tel,
	}, nil
}

// Run forwards until ctx is done or Close is called, then returns nil. It
// connects to PostgreSQL on a connection of its own, made with the pool's
// ConnConfig (pgxpool's BeforeConnect and AfterConnect hooks do not apply),
// stands by until it is the table's active forwarder, runs Setup, connects
// to Kafka and forwards (see Forwarding in the package documentation).
// Failures of PostgreSQL or Kafka, and tables missing with
// DisableAutoCreateSchema, are logged and retried with RetryBackoff; only
// a configuration that cannot work (an error wrapping koto.ErrInvalidConfig)
// ends Run with an error. While Run runs, standing
// by or active, the table's backlog is reported to ForwarderConfig.Telemetry.
// Run may be called again after it returned, but not while it runs.
func (f *Forwarder) Run(ctx context.Context) error {
	ctx, err := f.start(ctx)
	if err != nil {
		return err
	}
	defer f.stop()
	err = retry.Do(ctx, f.cfg.RetryBackoff.Delay, func() error {
		progressed, err := f.session(ctx)
		if err == nil && ctx.Err() == nil {
			err = errors.New("outbox: the forwarder's session ended")
		}
		if progressed && err != nil {
			return retry.AfterProgress(err)
		}
		return err
	}, func(fail retry.Failure) error {
		if ctx.Err() != nil || fatal(fail.Err) {
			return fail.Err
		}
		f.log.Warn("outbox forwarder failed; retrying", slog.Any("error", fail.Err), slog.Duration("retry_in", fail.Delay))
		return nil
	}, nil)
	if ctx.Err() != nil {
		return nil
	}
	f.log.Error("outbox forwarder stopped", slog.Any("error", err))
	return err
}

// fatal reports whether err is one retrying cannot fix.
func fatal(err error) bool {
	return errors.Is(err, koto.ErrInvalidConfig)
}

// start marks the forwarder running, registers its backlog gauges and
// returns Run's context.
func (f *Forwarder) start(ctx context.Context) (context.Context, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closed:
		return nil, errors.New("outbox: Forwarder.Run after Close")
	case f.running:
		return nil, errors.New("outbox: Forwarder.Run called while it runs")
	}
	observed, err := f.tel.ObserveOutbox(f.o.t.outbox, f.observe)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	f.running, f.cancel, f.done, f.observed = true, cancel, make(chan struct{}), observed
	return ctx, nil
}

// stop ends Run: it closes the producer, unregisters the gauges and
// releases Close.
func (f *Forwarder) stop() {
	f.closeProducer()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.observed.Unregister(); err != nil {
		f.log.Warn("outbox forwarder: unregister the backlog gauges", slog.Any("error", err))
	}
	f.cancel()
	f.running, f.observed = false, nil
	close(f.done)
}

// observe reads the backlog for the gauges, within QueryTimeout.
func (f *Forwarder) observe(ctx context.Context) (telemetry.OutboxBacklog, error) {
	var s Status
	err := f.query(ctx, func(ctx context.Context) (err error) {
		s, err = f.o.Status(ctx)
		return err
	})
	return telemetry.OutboxBacklog{Waiting: s.Waiting, Lag: s.Lag, Scheduled: s.Scheduled}, err
}

// Close stops Run and waits until it has returned: the connection is
// closed, which hands the table to a standby forwarder, and the producer
// is closed after its in-flight batch. Close is safe to call more than
// once, and without Run; it returns nil.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	f.closed = true
	cancel, done, running := f.cancel, f.done, f.running
	f.mu.Unlock()
	if running {
		cancel()
		<-done
	}
	return nil
}

// Active reports whether this forwarder is the active one of its table
// now: it holds the table's lock and forwards.
func (f *Forwarder) Active() bool { return f.active.Load() }

// Forwarded returns how many messages this forwarder has produced to Kafka
// and recorded as forwarded since it was made.
func (f *Forwarder) Forwarded() int64 { return f.forwarded.Load() }

func (f *Forwarder) closeProducer() {
	if f.producer != nil {
		if err := f.producer.Close(); err != nil {
			f.log.Warn("outbox forwarder: close the Kafka producer", slog.Any("error", err))
		}
		f.producer = nil
	}
}
