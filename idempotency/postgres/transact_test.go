package postgres_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/pgtest"
)

// TestBeginClaim: a new key is claimed in an open transaction whose commit
// keeps the mark; a key with a fresh mark is a duplicate, which leaves no
// transaction and no connection behind; a rolled-back claim leaves no mark.
func TestBeginClaim(t *testing.T) {
	pool := pgtest.Pool(t)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})

	key := newUUIDKey()
	tx, claimed, err := s.BeginClaim(ctxT(t), key)
	if err != nil || !claimed || tx == nil {
		t.Fatalf("first claim = %v, %v, %v; want an open transaction that claimed", tx, claimed, err)
	}
	if isProcessed(t, s, key) {
		t.Fatal("an uncommitted claim is visible outside its transaction")
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !isProcessed(t, s, key) {
		t.Fatal("a committed claim left no mark")
	}

	tx, claimed, err = s.BeginClaim(ctxT(t), key)
	if err != nil || claimed || tx != nil {
		t.Fatalf("claim of a fresh mark = %v, %v, %v; want a duplicate with no transaction", tx, claimed, err)
	}
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d connections held after a duplicate", n)
	}

	other := newUUIDKey()
	tx, claimed, err = s.BeginClaim(ctxT(t), other)
	if err != nil || !claimed {
		t.Fatalf("claim = %v, %v", claimed, err)
	}
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if isProcessed(t, s, other) {
		t.Fatal("a rolled-back claim left a mark")
	}
}

// TestBeginClaimOneRoundTrip: BeginClaim writes to the server once (BEGIN
// and the claim in one batch) and sends the very statement of
// MarkProcessedTx. It counts the writes on the connection, which does not
// depend on timing.
func TestBeginClaimOneRoundTrip(t *testing.T) {
	var writes atomic.Int64
	tracer := &batchTracer{}
	pool := countingPool(t, &writes, tracer)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})

	claimTwice := func() (writesOfSecond int64) {
		for i := range 2 {
			before := writes.Load()
			tx, claimed, err := s.BeginClaim(ctxT(t), newUUIDKey())
			if err != nil || !claimed {
				t.Fatalf("claim = %v, %v", claimed, err)
			}
			writesOfSecond = writes.Load() - before
			if i == 0 { // the first on the connection also prepares the claim
				writesOfSecond = 0
			}
			if err := tx.Commit(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
		return writesOfSecond
	}
	if n := claimTwice(); n != 1 {
		t.Fatalf("BeginClaim wrote to the server %d times, want once", n)
	}

	tx := begin(t, pool)
	tracer.reset()
	if _, err := s.MarkProcessedTx(ctxT(t), tx, newUUIDKey()); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	claimSQL := tracer.sqls()[0]
	tracer.reset()
	claimTwice()
	if got := tracer.batchSQLs(); len(got) != 4 || got[1] != claimSQL || got[3] != claimSQL {
		t.Fatalf("BeginClaim batches %q; want BEGIN and MarkProcessedTx's statement %q", got, claimSQL)
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
