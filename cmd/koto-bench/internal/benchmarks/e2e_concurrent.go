package benchmarks

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
)

// remoteDB is the benchmark's database through another pool, such as one
// whose connections go through a delaying proxy.
type remoteDB struct {
	pool  *pgxpool.Pool
	store *postgres.Store
}

// SetRemote gives the variants with Remote their pool: the same database
// as NewE2E's, a hop away. Close closes its store; the pool stays open.
func (e *E2E) SetRemote(pool *pgxpool.Pool) error {
	store, err := postgres.NewStore(pool, postgres.Config{Schema: e.schema, CleanupInterval: -1})
	if err != nil {
		return err
	}
	e.remote = &remoteDB{pool: pool, store: store}
	return nil
}

// StorePoolConns is the size of the store's own pool in the variants with
// OwnStorePool: at most half of it, 2, of the store's checks (and of its
// marks) in flight at once, the others waiting to go together.
const StorePoolConns = 4

// ownStore returns a store in schema on a pool of StorePoolConns
// connections to pool's database.
func ownStore(pool *pgxpool.Pool, schema string) (*remoteDB, error) {
	cfg := pool.Config().Copy()
	cfg.MaxConns, cfg.MinConns = StorePoolConns, 0
	own, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	store, err := postgres.NewStore(own, postgres.Config{Schema: schema, CleanupInterval: -1})
	if err != nil {
		own.Close()
		return nil, err
	}
	return &remoteDB{pool: own, store: store}, nil
}

// db returns the pool of v's handler and the store of its chain.
func (e *E2E) db(v E2EVariant) (*pgxpool.Pool, *postgres.Store) {
	pool, store := e.pool, e.store
	if v.Remote && e.remote != nil {
		pool, store = e.remote.pool, e.remote.store
	}
	if v.OwnStorePool {
		store = e.own.store
	}
	return pool, store
}

func (e *E2E) insert() string {
	return "INSERT INTO " + e.table + " (message_uuid, payload) VALUES ($1, $2)"
}

// Run runs v with n messages, through Kafka and the router as
// [E2E.Consume] does, or straight through pgx with [E2E.Raw] for a RawPgx
// variant, and returns the time they took. It adds what they cost, from
// the first message to the last, to the variant's [E2E.CPU].
func (e *E2E) Run(ctx context.Context, v E2EVariant, n int) (time.Duration, error) {
	var (
		d          time.Duration
		err        error
		start, end cpuSample
	)
	if v.RawPgx {
		start = sampleCPU()
		d, err = e.Raw(ctx, v, n)
		end = sampleCPU()
	} else {
		var run *E2ERun
		if run, err = e.Start(ctx, v, n); err != nil {
			return 0, err
		}
		d, err = run.Wait(ctx)
		start, end = run.cpuStart, run.cpuEnd
		if cerr := run.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close the router: %w", cerr)
		}
	}
	if err == nil {
		e.addCPU(v.Name, end.since(start, benchBackends(ctx, e.pool)))
	}
	return d, err
}

func (e *E2E) addCPU(name string, c CPU) {
	e.cpuMu.Lock()
	defer e.cpuMu.Unlock()
	e.cpu[name] = e.cpu[name].Add(c)
}

// ResetCPU forgets what the runs of variants cost.
func (e *E2E) ResetCPU(variants []E2EVariant) {
	e.cpuMu.Lock()
	defer e.cpuMu.Unlock()
	for _, v := range variants {
		delete(e.cpu, v.Name)
	}
}

// CPU returns what the runs of the variant named name cost through
// [E2E.Run], the filling of their topics and the joining of their groups
// included.
func (e *E2E) CPU(name string) CPU {
	e.cpuMu.Lock()
	defer e.cpuMu.Unlock()
	return e.cpu[name]
}

// Raw runs n transactions of the transactional mode from v.Concurrency
// goroutines, straight through pgx, with the store's round trips: BEGIN
// and the claim in one, the handler's row, COMMIT. It is the database's own
// limit for the transactional consumer. With v.Batch, it runs the batch
// consumer's transactions instead (see rawBatches).
func (e *E2E) Raw(ctx context.Context, v E2EVariant, n int) (time.Duration, error) {
	if v.Batch > 0 {
		return e.rawBatches(ctx, v, n)
	}
	pool, store := e.db(v)
	claim, insert := ClaimSQL(store), e.insert()
	tx := message.HandlerFunc(func(msg *message.Message) ([]*message.Message, error) {
		return nil, rawClaimAndWrite(msg.Context(), pool, claim, insert, msg)
	})
	return runWorkers(ctx, max(v.Concurrency, 1), n, tx)
}

func rawClaimAndWrite(ctx context.Context, pool *pgxpool.Pool, claim, insert string, msg *message.Message) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(claim, pgtype.UUID{Bytes: uuid.Must(uuid.NewV7()), Valid: true})
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, insert, msg.UUID, []byte(msg.Payload)); err != nil {
		_, _ = conn.Exec(ctx, "ROLLBACK")
		return err
	}
	_, err = conn.Exec(ctx, "COMMIT")
	return err
}

// ClaimSQL writes out the claim statement of store, the same text as the
// store's, as [StoreSQL] does for its check and mark.
func ClaimSQL(store *postgres.Store) string {
	return "INSERT INTO " + store.Table() + " AS m (message_id) VALUES ($1)" +
		" ON CONFLICT (message_id) DO UPDATE SET processed_at = now()" +
		" WHERE m.processed_at <= now() - " + windowSQL(store)
}

// Concurrency of the concurrent variants: the local and remote ones, and
// the one whose handler waits on an outside call.
const (
	ConcurrentLocal   = 32
	ConcurrentWaiting = 256
	// OutsideCall is how long the handler of the waiting variants waits.
	OutsideCall = 20 * time.Millisecond
)

// Names of the variants that E2EConcurrentVariants returns.
var (
	E2ERawTransactional      = "raw pgx claim + row, " + strconv.Itoa(ConcurrentLocal) + " goroutines"
	E2EConcWrite             = "concurrent write (" + strconv.Itoa(ConcurrentLocal) + ")"
	E2EConcWriteCheckHandle  = "concurrent write + check-handle-mark (" + strconv.Itoa(ConcurrentLocal) + ", store pool of " + strconv.Itoa(StorePoolConns) + ")"
	E2EConcWriteCheckShared  = "concurrent write + check-handle-mark (" + strconv.Itoa(ConcurrentLocal) + ", store on the handler's pool)"
	E2EConcWriteTx           = "concurrent write + transactional (" + strconv.Itoa(ConcurrentLocal) + ")"
	E2EConcNoop              = "concurrent no-op (" + strconv.Itoa(ConcurrentLocal) + ")"
	E2ERemoteWrite           = "write, PostgreSQL 1 ms away"
	E2ERemoteConcWriteTx     = "concurrent write + transactional (" + strconv.Itoa(ConcurrentLocal) + "), PostgreSQL 1 ms away"
	E2ERemoteConcDeferred    = "concurrent write + transactional, deferred claim (" + strconv.Itoa(ConcurrentLocal) + "), PostgreSQL 1 ms away"
	E2EWaitCheckHandle       = "20 ms call + check-handle-mark"
	E2EConcWaitCheckHandle   = "concurrent 20 ms call + check-handle-mark (" + strconv.Itoa(ConcurrentWaiting) + ")"
	waitingMessages          = 400  // one at a time: about 2 s at 4 partitions / 20 ms
	waitingConcurrentMessage = 8000 // concurrent: about as long, at the target
)

// E2EConcurrentVariants returns the variants of the concurrent consumer's
// performance targets, each beside its baseline: the transactional
// consumer against raw pgx at the same concurrency (≥ 0.7), check-handle-
// mark against the same concurrent subscriber without idempotency (a
// figure, with the store on a small pool of its own and on the handler's
// pool: the 0.8 target is batches', [E2EBatchVariants]),
// with PostgreSQL 1 ms away the transactional consumer against the
// one-at-a-time consumer without idempotency (≥ 2; with a deferred claim,
// a figure), and a handler that
// waits 20 ms, with check-handle-mark, concurrent against one at a time
// (≥ 20); and, as figures, the concurrent subscriber without idempotency
// against one at a time. The one-at-a-time baselines come first, measured
// again beside them.
func E2EConcurrentVariants() []E2EVariant {
	c, w := ConcurrentLocal, ConcurrentWaiting
	return []E2EVariant{
		{Name: E2EWrite, Handler: WriteHandler},
		{Name: E2ENoop, Handler: NoopHandler},
		{Name: E2EWriteTransactional, Handler: WriteHandler, Idempotency: Transactional}, // the latency's baseline and load
		{Name: E2ERawTransactional, Handler: WriteHandler, Idempotency: Transactional, RawPgx: true, Concurrency: c},
		{Name: E2EConcWriteTx, Handler: WriteHandler, Idempotency: Transactional, Concurrency: c, Baseline: E2ERawTransactional, Target: 0.7},
		{Name: E2EConcWrite, Handler: WriteHandler, Concurrency: c, Baseline: E2EWrite},
		{Name: E2EConcWriteCheckHandle, Handler: WriteHandler, Idempotency: CheckHandleMark, Concurrency: c, OwnStorePool: true, Baseline: E2EConcWrite},
		{Name: E2EConcWriteCheckShared, Handler: WriteHandler, Idempotency: CheckHandleMark, Concurrency: c, Baseline: E2EConcWrite},
		{Name: E2EConcNoop, Handler: NoopHandler, Concurrency: c, Baseline: E2ENoop},
		{Name: E2ERemoteWrite, Handler: WriteHandler, Remote: true},
		{Name: E2ERemoteConcWriteTx, Handler: WriteHandler, Idempotency: Transactional, Concurrency: c, Remote: true, Baseline: E2ERemoteWrite, Target: 2},
		{Name: E2ERemoteConcDeferred, Handler: WriteHandler, Idempotency: TransactionalDeferred, Concurrency: c, Remote: true, Baseline: E2ERemoteWrite},
		{Name: E2EWaitCheckHandle, Handler: NoopHandler, Idempotency: CheckHandleMark, Wait: OutsideCall, Messages: waitingMessages},
		{Name: E2EConcWaitCheckHandle, Handler: NoopHandler, Idempotency: CheckHandleMark, Wait: OutsideCall, Concurrency: w,
			Messages: waitingConcurrentMessage, Baseline: E2EWaitCheckHandle, Target: 20},
	}
}
