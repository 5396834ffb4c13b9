package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/pgschema"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// modes are the two ways Transact claims: before fn runs, or with fn's
// first statement (Claim.Defer).
var modes = []struct {
	name     string
	deferred bool
}{
	{"claim first", false},
	{"deferred", true},
}

// inTx runs s.Transact with c, calling fn with the transaction of its
// context.
func inTx(t *testing.T, s *postgres.Store, c idempotency.Claim, fn func(ctx context.Context, tx pgx.Tx) error) (bool, error) {
	t.Helper()
	return s.Transact(ctxT(t), c, func(ctx context.Context) error {
		tx, ok := postgres.TxFromContext(ctx)
		if !ok {
			return errors.New("fn's context carries no transaction")
		}
		return fn(ctx, tx)
	})
}

// TestTransact: a new key is claimed in a transaction whose commit keeps
// fn's writes with the mark, and neither is visible before; a key with a
// fresh mark is a duplicate whose writes are not kept and which holds no
// connection; fn's error or panic rolls the claim back with its writes.
func TestTransact(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			pool := pgtest.Pool(t)
			schema := pgtest.Schema(t, pool)
			pgtest.Exec(t, pool, "CREATE TABLE "+schema+".fx (v int)")
			s := newStore(t, pool, postgres.Config{Schema: schema})
			insert := "INSERT INTO " + schema + ".fx VALUES ($1)"
			rows := func(v int) int64 {
				return pgtest.QueryInt(t, pool, "SELECT count(*) FROM "+schema+".fx WHERE v = $1", v)
			}
			claim := func(key string) idempotency.Claim { return idempotency.Claim{Key: key, Defer: m.deferred} }

			key := newUUIDKey()
			calls := 0
			claimed, err := inTx(t, s, claim(key), func(ctx context.Context, tx pgx.Tx) error {
				calls++
				if _, err := tx.Exec(ctx, insert, 1); err != nil {
					return err
				}
				if isProcessed(t, s, key) || rows(1) != 0 {
					t.Error("the claim or a write is visible outside the transaction before the commit")
				}
				return nil
			})
			if err != nil || !claimed || calls != 1 {
				t.Fatalf("Transact of a new key = %v, %v with %d calls of fn; want claimed, one call", claimed, err, calls)
			}
			if !isProcessed(t, s, key) || rows(1) != 1 {
				t.Fatal("the commit kept not both the mark and the write")
			}

			var dupErr error
			claimed, err = inTx(t, s, claim(key), func(ctx context.Context, tx pgx.Tx) error {
				calls++
				_, dupErr = tx.Exec(ctx, insert, 2)
				return dupErr
			})
			if err != nil || claimed {
				t.Fatalf("Transact of a fresh mark = %v, %v; want a duplicate", claimed, err)
			}
			switch {
			case !m.deferred && calls != 1:
				t.Errorf("fn ran for a duplicate claimed before it")
			case m.deferred && (calls != 2 || !errors.Is(dupErr, postgres.ErrDuplicate)):
				t.Errorf("fn's first statement of a deferred duplicate returned %v, want ErrDuplicate", dupErr)
			}
			if n := pool.Stat().AcquiredConns(); n != 0 || rows(2) != 0 {
				t.Fatalf("a duplicate left %d rows and holds %d connections", rows(2), n)
			}

			boom := errors.New("boom")
			failed := newUUIDKey()
			claimed, err = inTx(t, s, claim(failed), func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, insert, 3); err != nil {
					return err
				}
				return boom
			})
			if !errors.Is(err, boom) || !claimed || koto.ClassOf(err) != koto.ClassRetryable {
				t.Fatalf("Transact with a failing fn = %v, %v (%v); want claimed and fn's retryable error", claimed, err, koto.ClassOf(err))
			}
			if isProcessed(t, s, failed) || rows(3) != 0 {
				t.Fatal("a failed fn left its claim or its write")
			}

			panicked := newUUIDKey()
			func() {
				defer func() {
					if v := recover(); v != "boom" {
						t.Errorf("Transact with a panicking fn recovered %v, want its panic", v)
					}
				}()
				_, _ = inTx(t, s, claim(panicked), func(ctx context.Context, tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, insert, 4); err != nil {
						return err
					}
					panic("boom")
				})
			}()
			if isProcessed(t, s, panicked) || rows(4) != 0 {
				t.Fatal("a panicking fn left its claim or its write")
			}
			if n := pool.Stat().AcquiredConns(); n != 0 {
				t.Fatalf("%d connections held after a panic", n)
			}
		})
	}
}

// TestTransactOneRoundTrip: BEGIN, the lock of the claim's lock keys and
// the claim take one write to the server, before fn runs or with fn's
// first statement (deferred), and send the very statement of
// MarkProcessedTx; the locks are taken before the claim writes and held
// in fn. It counts the writes on the connection, which does not depend on
// timing.
func TestTransactOneRoundTrip(t *testing.T) {
	for _, m := range modes {
		for _, l := range []struct {
			keys []string
			held int64 // distinct non-empty keys
		}{{nil, 0}, {[]string{"order-1", "order-2", "order-1", ""}, 2}} {
			t.Run(m.name+"/"+strings.Join(l.keys, ","), func(t *testing.T) {
				t.Parallel()
				var writes atomic.Int64
				tracer := &batchTracer{}
				pool := countingPool(t, &writes, tracer)
				s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})

				if err := s.EnsureSchema(ctxT(t)); err != nil {
					t.Fatal(err)
				}
				tx := begin(t, pool)
				tracer.reset()
				if _, err := s.MarkProcessedTx(ctxT(t), tx, newUUIDKey()); err != nil {
					t.Fatal(err)
				}
				claimSQL := tracer.sqls()[0]
				if err := tx.Rollback(ctxT(t)); err != nil {
					t.Fatal(err)
				}

				for i := range 2 { // the first on the connection also prepares the statements
					tracer.reset()
					key := newUUIDKey()
					start := writes.Load()
					var beforeFn, firstStatement int64
					var held int64
					var written bool
					claimed, err := inTx(t, s, idempotency.Claim{Key: key, LockKeys: l.keys, Defer: m.deferred}, func(ctx context.Context, tx pgx.Tx) error {
						beforeFn = writes.Load() - start
						err := tx.QueryRow(ctx, `SELECT count(*), pg_current_xact_id_if_assigned() IS NOT NULL
							FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND $1::int = 1`, 1).Scan(&held, &written)
						firstStatement = writes.Load() - start - beforeFn
						return err
					})
					if err != nil || !claimed || !isProcessed(t, s, key) {
						t.Fatalf("Transact = %v, %v; want claimed and committed", claimed, err)
					}
					if i == 0 {
						continue
					}
					want := int64(1)
					if m.deferred {
						want = 0
					}
					if beforeFn != want || firstStatement != 1 {
						t.Errorf("%d writes before fn and %d for its first statement, want %d and 1", beforeFn, firstStatement, want)
					}
					if held != l.held || !written {
						t.Errorf("in fn: %d advisory locks held, transaction written %v; want one lock a distinct key, taken before the claim wrote", held, written)
					}
					batch := []string{"begin"}
					if l.held > 0 {
						batch = append(batch, pgschema.LockKeysSQL)
					}
					batch = append(batch, claimSQL)
					if got := tracer.batchSQLs(); len(got) < len(batch) || !slices.Equal(got[1:len(batch)], batch[1:]) ||
						!strings.EqualFold(got[0], batch[0]) || m.deferred != (len(got) == len(batch)+1) {
						t.Errorf("Transact batched %q; want BEGIN, the lock if any, MarkProcessedTx's claim (and fn's first statement if deferred)", got)
					}
				}
			})
		}
	}
}

// TestTransactFailedLock: a lock PostgreSQL does not grant (here another
// transaction holds it past the session's lock_timeout) ends the
// transaction before fn writes anything, as an outage: nothing is claimed,
// and no connection is left held.
func TestTransactFailedLock(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			cfg := pgtest.Config(t)
			cfg.ConnConfig.RuntimeParams["lock_timeout"] = "50ms"
			pool := pgtest.PoolWith(t, cfg)
			s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
			if err := s.EnsureSchema(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			lock := pgtest.Name("key") // no other test locks it
			holder := begin(t, pgtest.Pool(t))
			if _, err := holder.Exec(ctxT(t), pgschema.LockKeysSQL, []string{lock}); err != nil {
				t.Fatal(err)
			}

			key := newUUIDKey()
			var stmtErr error
			calls := 0
			claimed, err := inTx(t, s, idempotency.Claim{Key: key, LockKeys: []string{lock}, Defer: m.deferred},
				func(ctx context.Context, tx pgx.Tx) error {
					calls++
					_, stmtErr = tx.Exec(ctx, "SELECT $1::int", 1)
					return stmtErr
				})
			if claimed || koto.ClassOf(err) != koto.ClassOutage || !strings.Contains(err.Error(), "55P03") {
				t.Fatalf("Transact under a held lock = %v, %v; want PostgreSQL's lock timeout as an outage, nothing claimed", claimed, err)
			}
			if (m.deferred && stmtErr == nil) || (!m.deferred && calls != 0) {
				t.Errorf("fn ran %d times, its statement returned %v, under a lock not granted", calls, stmtErr)
			}
			if n := pool.Stat().AcquiredConns(); n != 0 {
				t.Fatalf("%d connections held after a failed lock", n)
			}
			if isProcessed(t, s, key) {
				t.Fatal("a failed lock left a mark")
			}
		})
	}
}

// TestTransactRefusesUnreadableLockKeys: a lock key that PostgreSQL cannot
// read as text is poison, in both modes, and nothing is sent.
func TestTransactRefusesUnreadableLockKeys(t *testing.T) {
	pool := pgtest.Pool(t)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	for _, m := range modes {
		for _, bad := range []string{"a\x00b", "\xff"} {
			acquired := pool.Stat().AcquireCount()
			claimed, err := s.Transact(ctxT(t), idempotency.Claim{Key: newUUIDKey(), LockKeys: []string{"ok", bad}, Defer: m.deferred},
				func(context.Context) error {
					t.Errorf("%s: fn ran with lock key %q", m.name, bad)
					return nil
				})
			if claimed || koto.ClassOf(err) != koto.ClassPoison || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
				t.Errorf("%s: Transact with lock key %q = %v, %v; want poison naming the key", m.name, bad, claimed, err)
			}
			if n := pool.Stat().AcquireCount() - acquired; n != 0 {
				t.Errorf("%s: Transact with lock key %q took %d connections", m.name, bad, n)
			}
		}
	}
}

// countingPool returns a pool of one connection that counts its writes in
// writes and traces its queries with tracer, if not nil.
func countingPool(t *testing.T, writes *atomic.Int64, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	cfg := pgtest.Config(t)
	cfg.MaxConns = 1
	cfg.ConnConfig.Tracer = tracer
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, writes: writes}, nil
	}
	return pgtest.PoolWith(t, cfg)
}

// countingConn counts the writes on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// batchTracer records the SQL of queries and of the queries of batches.
type batchTracer struct {
	mu      sync.Mutex
	queries []string
	batches []string
}

func (b *batchTracer) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queries, b.batches = nil, nil
}

func (b *batchTracer) sqls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.queries...)
}

func (b *batchTracer) batchSQLs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.batches...)
}

func (b *batchTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	b.mu.Lock()
	b.queries = append(b.queries, d.SQL)
	b.mu.Unlock()
	return ctx
}

func (b *batchTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (b *batchTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (b *batchTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	b.mu.Lock()
	b.batches = append(b.batches, d.SQL)
	b.mu.Unlock()
}

func (b *batchTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
