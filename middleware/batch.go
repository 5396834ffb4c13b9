package middleware

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/internal/config"
	"github.com/koto-dev/watermill-koto/telemetry"
)

// Defaults of [BatchConfig].
const (
	defaultBatchMaxMessages = 500
	defaultBatchMaxBytes    = 4 << 20
	defaultBatchMaxWait     = 50 * time.Millisecond
	defaultBatchParallel    = 2
)

// BatchHandlerFunc handles the messages of one batch, in the order of
// their partitions' offsets, duplicates left out. In the transactional
// mode ctx, and each message's context, carry the batch's transaction
// (postgres.TxFromContext); the handler writes through it and neither
// commits nor rolls it back. A nil error commits every message; a
// [MessageErrors] names the messages that failed; any other error fails
// the batch (see Batches in the package doc).
type BatchHandlerFunc func(ctx context.Context, msgs []*message.Message) error

// BatchConfig configures the batches of [BatchDefaults]. The zero value is
// the default.
type BatchConfig struct {
	// MaxMessages flushes a batch once it holds this many messages.
	// Default 500. The subscriber must have at least as many in flight
	// (broker.Config.Concurrency) for a batch to fill.
	MaxMessages int
	// MaxBytes flushes a batch once its messages' payloads and metadata
	// reach this size. Default 4 MiB.
	MaxBytes int
	// MaxWait flushes a batch this long after its first message arrived.
	// Default 50ms.
	MaxWait time.Duration
	// Parallel is how many batches of one handler run at once; a full
	// batch waits for its turn, still filling until then. In the
	// transactional mode each running batch holds a connection. Default 2.
	Parallel int
	// Backoff spaces the attempts of a batch that an outage failed: a
	// store or database that cannot be reached, a serialization failure,
	// a handler error marked koto.Outage.
	Backoff koto.Backoff
}

func (c *BatchConfig) setDefaults() {
	if c.MaxMessages == 0 {
		c.MaxMessages = defaultBatchMaxMessages
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = defaultBatchMaxBytes
	}
	if c.MaxWait == 0 {
		c.MaxWait = defaultBatchMaxWait
	}
	if c.Parallel == 0 {
		c.Parallel = defaultBatchParallel
	}
}

// WithDefaults returns c with its zero fields set to their defaults, for
// code that sizes what feeds the batches (the subscriber's Concurrency, a
// pool's connections).
func (c BatchConfig) WithDefaults() BatchConfig {
	c.setDefaults()
	return c
}

// Validate reports every invalid field of c, zero fields counting as
// their defaults, in one error that wraps koto.ErrInvalidConfig.
func (c BatchConfig) Validate() error {
	p := config.For("middleware.BatchConfig")
	c.validate(p)
	return p.Err()
}

func (c BatchConfig) validate(p *config.Problems) {
	if c.MaxMessages < 0 {
		p.Add("MaxMessages", "is negative (%d); use 0 for the default (%d) or a positive count", c.MaxMessages, defaultBatchMaxMessages)
	}
	if c.MaxBytes < 0 {
		p.Add("MaxBytes", "is negative (%d); use 0 for the default (%d) or a positive size", c.MaxBytes, defaultBatchMaxBytes)
	}
	if c.MaxWait < 0 {
		p.Add("MaxWait", "is negative (%v); use 0 for the default (%v) or a positive duration", c.MaxWait, defaultBatchMaxWait)
	}
	if c.Parallel < 0 {
		p.Add("Parallel", "is negative (%d); use 0 for the default (%d) or a positive count", c.Parallel, defaultBatchParallel)
	}
	p.Nest("Backoff", c.Backoff.Validate())
}

// BatchChain is the chain of a batch handler that [BatchDefaults] builds:
// the middlewares of [Defaults] but Idempotency, which its handlers do
// for a whole batch at once.
type BatchChain struct {
	middlewares []message.HandlerMiddleware
	settings    batchSettings
	closed      atomic.Bool
	life        context.Context // ends at Close: outages are no longer waited out
	stop        context.CancelFunc
}

// batchSettings is what every batcher of a chain shares.
type batchSettings struct {
	batch    BatchConfig
	idem     IdempotencyConfig
	store    idempotency.Store // nil: no idempotency
	classify func(error) koto.Class
	tel      *telemetry.Telemetry
	logger   *slog.Logger
	closed   *atomic.Bool
	life     context.Context
}

// BatchDefaults returns the chain for batch handlers: Correlation,
// Telemetry, Logging and DeadLetter for each message, as [Defaults] builds
// them, and, in each [BatchChain.Handler], the batches with cfg.Store's
// idempotency (cfg.Idempotency.Transactional for exactly-once effects).
// IdempotencyConfig's Outbox, DeferClaim and MarkAfterAckTimeout do not
// apply to batches: a batch handler returns no messages and publishes
// through the outbox in its transaction. An invalid configuration is an
// error that wraps koto.ErrInvalidConfig and names each field.
func BatchDefaults(cfg Config, batch BatchConfig) (*BatchChain, error) {
	p := config.For("middleware.Config")
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
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
	chain, err := Defaults(Config{Publisher: cfg.Publisher, Logger: cfg.Logger, DeadLetter: cfg.DeadLetter, Telemetry: cfg.Telemetry})
	if err != nil {
		return nil, err
	}
	batch.setDefaults()
	cfg.Idempotency.setDefaults()
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	c := &BatchChain{middlewares: chain.middlewares}
	c.life, c.stop = context.WithCancel(context.Background())
	cfg.DeadLetter.setDefaults()
	c.settings = batchSettings{batch: batch, idem: cfg.Idempotency, store: cfg.Store, classify: cfg.DeadLetter.Classify,
		tel: chain.tel, logger: logger, closed: &c.closed, life: c.life}
	return c, nil
}

// Middlewares returns the per-message middlewares, outermost first, for
// the router handler of [BatchChain.Handler].
func (c *BatchChain) Middlewares() []message.HandlerMiddleware {
	return append([]message.HandlerMiddleware(nil), c.middlewares...)
}

// Handler returns the function of a router consumer handler
// (router.AddConsumerHandler) that gathers its messages into batches for
// h. Give each router handler its own.
func (c *BatchChain) Handler(h BatchHandlerFunc) message.NoPublishHandlerFunc {
	return newBatcher(c.settings, h).handle
}

// Close refuses new deliveries (an outage wrapping [ErrClosed]) and stops
// waiting out the outages of batches under way, which then fail as
// outages: their messages are nacked. Close the router first. ctx is not
// used: nothing is left to wait for. Calling it twice is fine.
func (c *BatchChain) Close(context.Context) error {
	c.closed.Store(true)
	c.stop()
	return nil
}
