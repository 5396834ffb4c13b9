package benchmarks

import (
	"cmp"
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/retry"
)

// E2EHandler is what the handler of an end-to-end variant does.
type E2EHandler int

const (
	// NoopHandler does nothing.
	NoopHandler E2EHandler = iota
	// WriteHandler inserts one row per message: with the transaction in
	// its context when there is one (the transactional mode), otherwise
	// straight on the pool, as one autocommitted statement.
	WriteHandler
	// WriteOwnTxHandler inserts the row in a transaction of its own
	// (pgx.BeginFunc: BEGIN, INSERT, COMMIT), as handlers that write more
	// than one statement do.
	WriteOwnTxHandler
)

// E2EMode is the idempotency of an end-to-end variant.
type E2EMode int

const (
	// NoIdempotency leaves idempotency out of the chain.
	NoIdempotency E2EMode = iota
	// CheckHandleMark is middleware.Idempotency with the PostgreSQL store.
	CheckHandleMark
	// Transactional is middleware.TransactionalIdempotency.
	Transactional
	// TransactionalDeferred is middleware.TransactionalIdempotency with
	// IdempotencyConfig.DeferClaim: BEGIN and the claim go with the
	// handler's first statement.
	TransactionalDeferred
)

// E2EVariant is one consumer pipeline of the end-to-end benchmark.
type E2EVariant struct {
	// Name names the variant in results; the E2E* constants.
	Name string
	// Handler is what the handler does.
	Handler E2EHandler
	// Idempotency is the idempotency middleware in the chain, if any.
	Idempotency E2EMode
	// Baseline names the variant this one is compared with; "" for a
	// baseline.
	Baseline string
	// Target is the least ratio to the baseline that the variant must
	// reach; 0 when there is none.
	Target float64
	// Telemetry is what the chain records with.
	Telemetry E2ETelemetry
	// Concurrency is the subscriber's broker.Config.Concurrency: 0, one
	// message per partition at a time; with RawPgx, the goroutines.
	Concurrency int
	// Wait is how long the handler waits, as on an outside call, before
	// it does what Handler says.
	Wait time.Duration
	// Remote puts PostgreSQL a hop away: the store and the handler use the
	// pool given to [E2E.SetRemote].
	Remote bool
	// OwnStorePool gives the store a pool of its own of StorePoolConns
	// connections, on which its concurrent calls share statements sooner
	// than on the handler's pool (see idempotency/postgres).
	OwnStorePool bool
	// RawPgx makes the variant no consumer: Concurrency goroutines run the
	// transactions of the transactional mode (BEGIN with the claim, the
	// handler's row, COMMIT) straight through pgx, without Kafka or the
	// router.
	RawPgx bool
	// Messages, when not 0, is the messages of each run of the variant,
	// instead of the comparison's.
	Messages int
	// Batch, when not 0, makes the handler a batch handler
	// (middleware.BatchDefaults) of batches up to Batch messages, on a
	// batch subscriber (broker.NewBatchSubscriber); with RawPgx, the
	// messages of each transaction.
	Batch int
	// Keys is how many partition keys the records have; 0 means E2EKeys.
	Keys int
	// Also names a second variant this one is compared with, beside
	// Baseline, and AlsoTarget the least ratio to it (0: none).
	Also       string
	AlsoTarget float64
}

// keys returns how many partition keys the records of v have.
func (v E2EVariant) keys() int { return cmp.Or(v.Keys, E2EKeys) }

// E2ETelemetry is the telemetry of an end-to-end variant.
type E2ETelemetry int

const (
	// TelemetryGlobal is middleware.Defaults' default: OpenTelemetry's
	// global providers, which nobody set, the no-op every application
	// starts with.
	TelemetryGlobal E2ETelemetry = iota
	// TelemetrySDK records with the OpenTelemetry SDK (SDKTelemetry):
	// every span sampled and exported in batches to nowhere, every metric
	// aggregated.
	TelemetrySDK
	// TelemetryNone leaves the telemetry middleware out of the chain,
	// which is then Correlation, Logging, DeadLetter; only for variants
	// without idempotency.
	TelemetryNone
)

// Names of the variants that E2EVariants returns.
const (
	E2EWrite                = "write"
	E2EWriteCheckHandleMark = "write + check-handle-mark"
	E2EWriteTransactional   = "write + transactional"
	E2EWriteDeferred        = "write + transactional, deferred claim"
	E2EWriteOwnTx           = "write in own tx"
	E2ENoop                 = "no-op"
	E2ENoopCheckHandleMark  = "no-op + check-handle-mark"
	E2ENoopTransactional    = "no-op + transactional"
	E2ENoopDeferred         = "no-op + transactional, deferred claim"
)

// E2EVariants returns the one-at-a-time consumers, baselines first: a
// handler that writes one row, without idempotency, with check-handle-mark
// and in the transactional mode, claim first and deferred; the same row
// written in the handler's own transaction; and a no-op handler without
// and with each idempotency. They are figures: the targets are the
// concurrent consumer's, [E2EConcurrentVariants].
func E2EVariants() []E2EVariant {
	return []E2EVariant{
		{Name: E2EWrite, Handler: WriteHandler},
		{Name: E2EWriteCheckHandleMark, Handler: WriteHandler, Idempotency: CheckHandleMark, Baseline: E2EWrite},
		{Name: E2EWriteTransactional, Handler: WriteHandler, Idempotency: Transactional, Baseline: E2EWrite},
		{Name: E2EWriteDeferred, Handler: WriteHandler, Idempotency: TransactionalDeferred, Baseline: E2EWrite},
		{Name: E2EWriteOwnTx, Handler: WriteOwnTxHandler, Baseline: E2EWrite},
		{Name: E2ENoop, Handler: NoopHandler},
		{Name: E2ENoopCheckHandleMark, Handler: NoopHandler, Idempotency: CheckHandleMark, Baseline: E2ENoop},
		{Name: E2ENoopTransactional, Handler: NoopHandler, Idempotency: Transactional, Baseline: E2ENoop},
		{Name: E2ENoopDeferred, Handler: NoopHandler, Idempotency: TransactionalDeferred, Baseline: E2ENoop},
	}
}

// Names of the variants that E2ETelemetryVariants returns.
const (
	E2EWriteTelemetry   = "write + telemetry (SDK)"
	E2ENoopTelemetry    = "no-op + telemetry (SDK)"
	E2EWriteNoTelemetry = "write, no telemetry middleware"
	E2ENoopNoTelemetry  = "no-op, no telemetry middleware"
)

// E2ETelemetryVariants returns the variants that measure the cost of
// telemetry against the baselines of E2EVariants, which record through the
// global providers nobody set: with the OpenTelemetry SDK configured, and
// without the telemetry middleware at all.
func E2ETelemetryVariants() []E2EVariant {
	return []E2EVariant{
		{Name: E2EWriteTelemetry, Handler: WriteHandler, Baseline: E2EWrite, Telemetry: TelemetrySDK},
		{Name: E2ENoopTelemetry, Handler: NoopHandler, Baseline: E2ENoop, Telemetry: TelemetrySDK},
		{Name: E2EWriteNoTelemetry, Handler: WriteHandler, Baseline: E2EWrite, Telemetry: TelemetryNone},
		{Name: E2ENoopNoTelemetry, Handler: NoopHandler, Baseline: E2ENoop, Telemetry: TelemetryNone},
	}
}

// handler returns the handler function of v: its wait, then its kind of
// handler.
func (e *E2E) handler(v E2EVariant) message.NoPublishHandlerFunc {
	h := e.handlerOf(v)
	if v.Wait <= 0 {
		return h
	}
	return func(msg *message.Message) error {
		if err := retry.Sleep(msg.Context(), v.Wait); err != nil {
			return err
		}
		return h(msg)
	}
}

// handlerOf returns the handler function of v's kind, writing to v's
// database.
func (e *E2E) handlerOf(v E2EVariant) message.NoPublishHandlerFunc {
	pool, _ := e.db(v)
	insert := e.insert()
	write := func(ctx context.Context, q interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}, msg *message.Message) error {
		_, err := q.Exec(ctx, insert, msg.UUID, []byte(msg.Payload))
		return err
	}
	switch v.Handler {
	case WriteHandler:
		return func(msg *message.Message) error {
			ctx := msg.Context()
			if tx, ok := postgres.TxFromContext(ctx); ok {
				return write(ctx, tx, msg)
			}
			return write(ctx, pool, msg)
		}
	case WriteOwnTxHandler:
		return func(msg *message.Message) error {
			ctx := msg.Context()
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return write(ctx, tx, msg) })
		}
	}
	return func(*message.Message) error { return nil }
}
