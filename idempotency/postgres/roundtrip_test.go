package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
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

// TestHotPathStatements counts what check+mark sends: each key in one
// check and one mark, alone or with the keys of concurrent callers, no
// schema checks once the table exists, and each statement prepared at
// most once per connection.
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

	tracer.mu.Lock()
	defer tracer.mu.Unlock()
	var checks, marks, checkedAlone, markedAlone int
	for sql, keys := range tracer.queries {
		switch {
		case strings.HasPrefix(sql, "SELECT EXISTS"):
			checks += keys
			checkedAlone += keys
		case strings.HasPrefix(sql, "SELECT message_id FROM"):
			checks += keys
		case strings.Contains(sql, "unnest($1::uuid[])"):
			marks += keys
		case strings.Contains(sql, "INSERT INTO"):
			marks += keys
			markedAlone += keys
		default:
			t.Errorf("unexpected statement %q", sql)
		}
	}
	if checks != n || marks != n || checkedAlone == 0 || markedAlone == 0 {
		t.Fatalf("%d check+marks sent %v, want %d keys checked and marked, some alone", n, tracer.queries, n)
	}
	for sql := range tracer.queries {
		if p := tracer.prepares[sql]; p < 1 || p > int(cfg.MaxConns) {
			t.Fatalf("%q prepared %d times on %d connections", sql, p, cfg.MaxConns)
		}
	}
}
