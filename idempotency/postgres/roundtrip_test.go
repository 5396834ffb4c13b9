package postgres_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// countingTracer counts the statements each connection sends and prepares.
type countingTracer struct {
	mu       sync.Mutex
	queries  map[string]int // by SQL, the keys sent: one, or the length of an array of them
	prepares map[string]int // by SQL, each prepare that reached the server
}

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	keys := 1
	if len(d.Args) > 0 {
		if many, ok := d.Args[0].([]pgtype.UUID); ok {
			keys = len(many)
		}
	}
	c.mu.Lock()
	c.queries[d.SQL] += keys
	c.mu.Unlock()
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *countingTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	return context.WithValue(ctx, prepareKey{}, d.SQL)
}

func (c *countingTracer) TracePrepareEnd(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareEndData) {
	if d.AlreadyPrepared || d.Err != nil {
		return
	}
	c.mu.Lock()
	c.prepares[ctx.Value(prepareKey{}).(string)]++
	c.mu.Unlock()
}

type prepareKey struct{}

// batchCountingTracer also counts the statements sent in batches.
type batchCountingTracer struct{ *countingTracer }

func (c batchCountingTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c batchCountingTracer) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.TraceQueryStart(ctx, conn, pgx.TraceQueryStartData{SQL: d.SQL, Args: d.Args})
}

func (c batchCountingTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestHotPathStatements counts what check+mark sends: each key in one
// check and one mark, alone or with the keys of concurrent callers, no
// schema checks once the table exists, and each statement prepared at
// most once per connection. Alone, a key goes in the very statements of
// the raw-pgx baseline of the benchmarks.
func TestHotPathStatements(t *testing.T) {
	tracer := &countingTracer{queries: map[string]int{}, prepares: map[string]int{}}
	cfg := pgtest.Config(t)
	cfg.MaxConns = 2
	cfg.ConnConfig.Tracer = tracer
	pool := pgtest.PoolWith(t, cfg)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	if err := s.EnsureSchema(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	tracer.mu.Lock()
	clear(tracer.queries)
	tracer.mu.Unlock()

	const n = 200
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range n / 2 {
				key := newUUIDKey()
				if done, err := s.IsProcessed(ctxT(t), key); err != nil || done {
					t.Errorf("IsProcessed = %v, %v", done, err)
				}
				if err := s.MarkProcessed(ctxT(t), key); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()

	// The raw-pgx baseline of the benchmarks must send the same statements.
	st := benchmarks.StoreSQL(s)
	tracer.mu.Lock()
	defer tracer.mu.Unlock()
	var checks, marks int
	for sql, keys := range tracer.queries {
		switch {
		case sql == st.Check || strings.HasPrefix(sql, "SELECT message_id FROM"):
			checks += keys
		case sql == st.Mark || strings.Contains(sql, "unnest($1::uuid[])"):
			marks += keys
		default:
			t.Errorf("unexpected statement %q", sql)
		}
	}
	if checks != n || marks != n || tracer.queries[st.Check] == 0 || tracer.queries[st.Mark] == 0 {
		t.Fatalf("%d check+marks sent %v, want %d keys checked and marked, some alone", n, tracer.queries, n)
	}
	if !strings.Contains(st.Check, "processed_at > now() - interval '86400000000 microseconds'") {
		t.Errorf("the check does not count the default window: %s", st.Check)
	}
	for sql := range tracer.queries {
		if p := tracer.prepares[sql]; p < 1 || p > int(cfg.MaxConns) {
			t.Fatalf("%q prepared %d times on %d connections", sql, p, cfg.MaxConns)
		}
	}
}

// TestClaimStatementsOfTheRawBaselines: Transact and TransactBatch claim
// with the very statements that the raw-pgx baselines of the consumer
// benchmarks send (benchmarks.ClaimSQL and ClaimBatchSQL), and a batch's
// keys go in one statement.
func TestClaimStatementsOfTheRawBaselines(t *testing.T) {
	tracer := &countingTracer{queries: map[string]int{}, prepares: map[string]int{}}
	cfg := pgtest.Config(t)
	cfg.ConnConfig.Tracer = batchCountingTracer{tracer}
	pool := pgtest.PoolWith(t, cfg)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	if err := s.EnsureSchema(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if claimed, err := s.Transact(ctxT(t), idempotency.Claim{Key: newUUIDKey()}, func(context.Context) error { return nil }); err != nil || !claimed {
		t.Fatalf("Transact = %v, %v", claimed, err)
	}
	keys := []string{newUUIDKey(), newUUIDKey(), "not-a-uuid"}
	err := s.TransactBatch(ctxT(t), idempotency.BatchClaim{Keys: keys}, func(claimed []bool, _ func(context.Context) context.Context) error {
		if !slices.Equal(claimed, []bool{true, true, true}) {
			t.Errorf("claimed %v, want every new key", claimed)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tracer.mu.Lock()
	defer tracer.mu.Unlock()
	if n := tracer.queries[benchmarks.ClaimSQL(s)]; n != 1 {
		t.Errorf("Transact claimed %d keys with benchmarks.ClaimSQL's statement, want 1; sent %v", n, tracer.queries)
	}
	if n := tracer.queries[benchmarks.ClaimBatchSQL(s)]; n != len(keys) {
		t.Errorf("TransactBatch claimed %d keys with benchmarks.ClaimBatchSQL's statement, want %d; sent %v", n, len(keys), tracer.queries)
	}
}
