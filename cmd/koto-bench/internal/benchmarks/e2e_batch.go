package benchmarks

import (
	"bytes"
	"context"
	"github.com/koto-dev/watermill-koto/broker"
	"slices"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/middleware"
)

// Batches of the batch variants: up to BatchSize messages each,
// BatchParallel of a subscriber at once (broker.BatchConfig's MaxMessages
// and Parallel).
const (
	BatchSize     = 500
	BatchParallel = 2
)

// Names of the variants that E2EBatchVariants returns.
var (
	E2EBatchWriteTx          = "batch write + transactional (" + strconv.Itoa(BatchSize) + ")"
	E2ERawBatch              = "raw pgx batch claim + rows (" + strconv.Itoa(BatchSize) + " per transaction, " + strconv.Itoa(BatchParallel) + " goroutines)"
	E2EBatchWrite            = "batch write (" + strconv.Itoa(BatchSize) + ")"
	E2EBatchWriteCheckHandle = "batch write + check-handle-mark (" + strconv.Itoa(BatchSize) + ")"
	E2EHotConcWriteTx        = "concurrent write + transactional (" + strconv.Itoa(ConcurrentLocal) + "), one key"
	E2EHotBatchWriteTx       = "batch write + transactional (" + strconv.Itoa(BatchSize) + "), one key"
	E2EBatchNoop             = "batch no-op (" + strconv.Itoa(BatchSize) + ")"
)

// E2EBatchVariants returns the variants of the batch handlers' performance
// targets, with their baselines, measured again beside them: the
// transactional batch consumer against the per-message concurrent
// transactional consumer (≥ 5) and against raw pgx running the same batch
// transactions from as many goroutines as batches run at once (≥ 0.5);
// batches in the check-handle-mark mode against the per-message
// concurrent subscriber without idempotency (≥ 0.8), and, as a figure,
// against batches without idempotency, themselves a figure against the
// per-message subscriber; a single hot key, batches against per-message
// (≥ 5); and, as a figure, batches of a no-op handler against raw pgx's
// batches: what Kafka and the router alone leave of the raw rate. The
// batch handlers write their batch's rows with one multi-row statement.
func E2EBatchVariants() []E2EVariant {
	c, b := ConcurrentLocal, BatchSize
	return []E2EVariant{
		{Name: E2EConcWriteTx, Handler: WriteHandler, Idempotency: Transactional, Concurrency: c},
		{Name: E2EConcWrite, Handler: WriteHandler, Concurrency: c},
		{Name: E2EHotConcWriteTx, Handler: WriteHandler, Idempotency: Transactional, Concurrency: c, Keys: 1},
		{Name: E2ERawBatch, Handler: WriteHandler, Idempotency: Transactional, RawPgx: true, Batch: b, Concurrency: BatchParallel},
		{Name: E2EBatchWriteTx, Handler: WriteHandler, Idempotency: Transactional, Batch: b,
			Baseline: E2EConcWriteTx, Target: 5, Also: E2ERawBatch, AlsoTarget: 0.5},
		{Name: E2EBatchWrite, Handler: WriteHandler, Batch: b, Baseline: E2EConcWrite},
		{Name: E2EBatchWriteCheckHandle, Handler: WriteHandler, Idempotency: CheckHandleMark, Batch: b,
			Baseline: E2EConcWrite, Target: 0.8, Also: E2EBatchWrite},
		{Name: E2EHotBatchWriteTx, Handler: WriteHandler, Idempotency: Transactional, Batch: b, Keys: 1,
			Baseline: E2EHotConcWriteTx, Target: 5},
		{Name: E2EBatchNoop, Handler: NoopHandler, Batch: b, Baseline: E2ERawBatch},
	}
}

// BatchMaxWait is the flush time of the batch variants' batches, the
// default BatchConfig.MaxWait: a batch runs at the latest this long after
// its first message arrived.
func BatchMaxWait() time.Duration { return broker.BatchConfig{}.WithDefaults().MaxWait }

// batchChain returns middleware.BatchDefaults with v's telemetry and
// idempotency; the batch subscriber sizes the batches.
func (e *E2E) batchChain(v E2EVariant, scope func(*message.Message) string) (batchChain, error) {
	c, err := middleware.BatchDefaults(e.config(v, scope), middleware.BatchConfig{})
	return batchChain{c}, err
}

// batchChain is a batch chain as a chain: it has no per-message
// middlewares.
type batchChain struct{ *middleware.BatchChain }

func (batchChain) Middlewares() []message.HandlerMiddleware { return nil }

// insertBatch is the statement of the batch handlers: one row per
// message, $1 the UUIDs and $2 the payloads.
func (e *E2E) insertBatch() string {
	return "INSERT INTO " + e.table + " (message_uuid, payload) SELECT * FROM unnest($1::text[], $2::bytea[])"
}

// batchHandler returns the batch handler of v: with WriteHandler, the
// batch's rows in one statement, in the batch's transaction when there is
// one, otherwise autocommitted on v's pool.
func (e *E2E) batchHandler(v E2EVariant) middleware.BatchHandlerFunc {
	pool, _ := e.db(v)
	insert := e.insertBatch()
	return func(ctx context.Context, msgs []*message.Message) error {
		if v.Handler == NoopHandler {
			return nil
		}
		ids, payloads := make([]string, len(msgs)), make([][]byte, len(msgs))
		for i, m := range msgs {
			ids[i], payloads[i] = m.UUID, m.Payload
		}
		var err error
		if tx, ok := postgres.TxFromContext(ctx); ok {
			_, err = tx.Exec(ctx, insert, ids, payloads)
		} else {
			_, err = pool.Exec(ctx, insert, ids, payloads)
		}
		return err
	}
}

// rawBatches runs the transactions of the transactional batch consumer
// for n messages, v.Batch per transaction, from v.Concurrency goroutines,
// straight through pgx: BEGIN and the store's claim of the batch's keys in
// one round trip, the handler's multi-row insert of the rows it claimed,
// COMMIT. It is the database's own limit for the batch consumer.
func (e *E2E) rawBatches(ctx context.Context, v E2EVariant, n int) (time.Duration, error) {
	pool, store := e.db(v)
	claim, insert := ClaimBatchSQL(store), e.insertBatch()
	return runChunks(ctx, max(v.Concurrency, 1), n, v.Batch, func(from, to int64) error {
		ids, payloads := make([]string, 0, to-from), make([][]byte, 0, to-from)
		for i := from; i < to; i++ {
			ids = append(ids, uuid.Must(uuid.NewV7()).String())
			payloads = append(payloads, payload(i))
		}
		return rawBatch(ctx, pool, claim, insert, ids, payloads)
	})
}

// rawBatch runs one batch transaction of rawBatches for the messages of
// ids and payloads on a connection of pool: their keys are new UUIDs, as
// the raw per-message transactions' are.
func rawBatch(ctx context.Context, pool *pgxpool.Pool, claim, insert string, ids []string, payloads [][]byte) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	keys := make([]pgtype.UUID, len(ids))
	for i := range keys {
		keys[i] = pgtype.UUID{Bytes: uuid.Must(uuid.NewV7()), Valid: true}
	}
	sorted := slices.Clone(keys)
	slices.SortFunc(sorted, func(a, b pgtype.UUID) int { return bytes.Compare(a.Bytes[:], b.Bytes[:]) })
	marked, err := beginAndClaim(ctx, conn, claim, sorted)
	if err != nil {
		return err
	}
	var claimedIDs []string
	var claimedPayloads [][]byte
	for i, k := range keys {
		if marked[k.Bytes] {
			claimedIDs, claimedPayloads = append(claimedIDs, ids[i]), append(claimedPayloads, payloads[i])
		}
	}
	if _, err := conn.Exec(ctx, insert, claimedIDs, claimedPayloads); err != nil {
		_, _ = conn.Exec(ctx, "ROLLBACK")
		return err
	}
	_, err = conn.Exec(ctx, "COMMIT")
	return err
}

// beginAndClaim sends BEGIN and the claim of keys in one round trip and
// returns the keys the claim marked, read as the store reads them.
func beginAndClaim(ctx context.Context, conn *pgxpool.Conn, claim string, keys []pgtype.UUID) (map[[16]byte]bool, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(claim, keys)
	br := conn.SendBatch(ctx, b)
	marked := make(map[[16]byte]bool, len(keys))
	_, err := br.Exec()
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			var k pgtype.UUID
			_, err = pgx.ForEachRow(rows, []any{&k}, func() error {
				marked[k.Bytes] = true
				return nil
			})
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_, _ = conn.Exec(ctx, "ROLLBACK")
	}
	return marked, err
}

// ClaimBatchSQL writes out the statement with which store claims a
// batch's keys (postgres.Store.TransactBatch), the same text as the
// store's, as [ClaimSQL] does for one key; $1 is the keys'
// idempotency.KeyUUID, in ascending order.
func ClaimBatchSQL(store *postgres.Store) string {
	return "INSERT INTO " + store.Table() + " AS m (message_id) SELECT k FROM unnest($1::uuid[]) AS k ORDER BY k" +
		" ON CONFLICT (message_id) DO UPDATE SET processed_at = now()" +
		" WHERE m.processed_at <= now() - " + windowSQL(store) + " RETURNING m.message_id"
}
