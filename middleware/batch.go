package middleware

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/internal/config"
	"github.com/koto-dev/watermill-koto/telemetry"
)

// BatchHandlerFunc handles the messages of one batch, in the order of
// their partitions' offsets, duplicates left out. In the transactional
// mode ctx, and each message's context, carry the batch's transaction
// (postgres.TxFromContext); the handler writes through it and neither
// commits nor rolls it back. A nil error commits every message; a
// [MessageErrors] names the messages that failed; any other error fails
// the batch (see Batches in the package doc).
type BatchHandlerFunc func(ctx context.Context, msgs []*message.Message) error

// BatchConfig configures the batches of [BatchDefaults] beyond the
// chain's Config. The zero value is the default. How batches fill is the
// batch subscriber's (broker.BatchConfig).
type BatchConfig struct {
	// Prepare, if set, checks each message before its batch runs: skip
	// acks it without handling it; an error goes the way of a handler's
	// error for that message alone (a koto.Poison one is dead-lettered at
	// once). A consumer decodes its payload there.
	Prepare func(msg *message.Message) (skip bool, err error)
	// Backoff spaces the attempts of a batch that an outage failed: a
	// store or database that cannot be reached, a serialization failure,
	// a handler error marked koto.Outage.
	Backoff koto.Backoff
}

// Validate reports every invalid field of c, zero fields counting as
// their defaults, in one error that wraps koto.ErrInvalidConfig.
func (c BatchConfig) Validate() error {
	p := config.For("middleware.BatchConfig")
	p.Nest("Backoff", c.Backoff.Validate())
	return p.Err()
}

// BatchChain runs batch handlers with the semantics of the chain that
// [Defaults] builds for one message at a time: correlation, telemetry, log
// lines, retries and dead letters for each message, and the idempotency of
// Config.Store for the whole batch at once. Build it with [BatchDefaults].
type BatchChain struct {
	settings batchSettings
	closed   atomic.Bool
	life     context.Context // ends at Close: outages are no longer waited out
	stop     context.CancelFunc
}

// batchSettings is what every batcher of a chain shares.
type batchSettings struct {
	batch    BatchConfig
	idem     IdempotencyConfig
	store    idempotency.Store // nil: no idempotency
	dead     *deadLetter
	classify func(error) koto.Class
	tel      *telemetry.Telemetry
	logger   *slog.Logger
	closed   *atomic.Bool
	life     context.Context
}

// BatchDefaults returns the chain of batch handlers of cfg: each
// [BatchChain.Handler] runs a batch handler on the batches of a batch
// subscriber (broker.NewBatchSubscriber), with cfg's dead letters,
// telemetry and log lines for each message, and cfg.Store's idempotency
// for each batch (cfg.Idempotency.Transactional for exactly-once
// effects). IdempotencyConfig's Outbox, DeferClaim and
// MarkAfterAckTimeout do not apply: a batch handler returns no messages
// and publishes through the outbox in its transaction. An invalid
// configuration is an error that wraps koto.ErrInvalidConfig and names
// each field.
func BatchDefaults(cfg Config, batch BatchConfig) (*BatchChain, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := config.For("middleware.Config")
	if _, ok := cfg.Store.(idempotency.TxBatchStore); cfg.Idempotency.Transactional && !ok {
		p.Add("Store", "is a %T, but batches in the transactional mode need an idempotency.TxBatchStore (a *postgres.Store)", cfg.Store)
	}
	if cfg.Idempotency.Outbox != nil || cfg.Idempotency.DeferClaim {
		p.Add("Idempotency", "sets Outbox or DeferClaim, which batches do not use; unset them and publish through the outbox's ContextPublisher in the batch handler")
	}
	p.Nest("Batch", batch.Validate())
	if err := p.Err(); err != nil {
		return nil, err
	}
	tel := cfg.Telemetry
	if tel == nil {
		var err error
		if tel, err = telemetry.New(telemetry.Config{}); err != nil {
			return nil, err
		}
	}
	cfg.DeadLetter.setDefaults()
	cfg.Idempotency.setDefaults()
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	c := &BatchChain{}
	c.life, c.stop = context.WithCancel(context.Background())
	c.settings = batchSettings{
		batch: batch, idem: cfg.Idempotency, store: cfg.Store, classify: cfg.DeadLetter.Classify,
		dead: newDeadLetter(tel.Publisher(cfg.Publisher), cfg.DeadLetter),
		tel:  tel, logger: logger, closed: &c.closed, life: c.life,
	}
	return c, nil
}

// Handler returns the function of a router consumer handler
// (router.AddConsumerHandler) that runs h on the batches of a batch
// subscriber. A message from another subscriber is run as a batch of its
// own. Give each router handler its own.
func (c *BatchChain) Handler(h BatchHandlerFunc) message.NoPublishHandlerFunc {
	return newBatcher(c.settings, h).handle
}

// Close refuses new batches (an outage wrapping [ErrClosed]: their
// messages are handed out again, to another instance) and stops waiting
// out the outages and retries of batches under way, whose unfinished
// messages are nacked. Close the router first. ctx is not used: nothing is
// left to wait for. Calling it twice is fine.
func (c *BatchChain) Close(context.Context) error {
	c.closed.Store(true)
	c.stop()
	return nil
}
