package benchmarks_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// sentStatements counts, by SQL, the statements that a pool's connections
// send, alone or in a batch.
type sentStatements struct {
	mu   sync.Mutex
	sent map[string]int
}

func (s *sentStatements) add(sql string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent[sql]++
}

func (s *sentStatements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.add(d.SQL)
	return ctx
}

func (s *sentStatements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *sentStatements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (s *sentStatements) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	s.add(d.SQL)
}

func (s *sentStatements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestRawBaselinesSendTheStoresStatements: the raw-pgx baselines send the
// very statements of the store: a key checked and marked alone
// (StoreSQL), claimed by Transact (ClaimSQL), and a batch's keys claimed
// by TransactBatch in one statement (ClaimBatchSQL).
func TestRawBaselinesSendTheStoresStatements(t *testing.T) {
	tracer := &sentStatements{sent: map[string]int{}}
	cfg := pgtest.Config(t)
	cfg.ConnConfig.Tracer = tracer
	pool := pgtest.PoolWith(t, cfg)
	store, err := postgres.NewStore(pool, postgres.Config{Schema: pgtest.Schema(t, pool), CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	ctx := kototest.Context(t)
	if err := store.EnsureSchema(ctx); err != nil {
		t.Fatal(err)
	}
	newKey := func() string { return uuid.Must(uuid.NewV7()).String() }

	key := newKey()
	if done, err := store.IsProcessed(ctx, key); err != nil || done {
		t.Fatalf("IsProcessed = %v, %v", done, err)
	}
	if err := store.MarkProcessed(ctx, key); err != nil {
		t.Fatal(err)
	}
	if claimed, err := store.Transact(ctx, idempotency.Claim{Key: newKey()}, func(context.Context) error { return nil }); err != nil || !claimed {
		t.Fatalf("Transact = %v, %v", claimed, err)
	}
	keys := []string{newKey(), newKey(), "not-a-uuid"}
	err = store.TransactBatch(ctx, idempotency.BatchClaim{Keys: keys}, func(claimed []bool, _ func(context.Context) context.Context) error {
		if !slices.Equal(claimed, []bool{true, true, true}) {
			t.Errorf("claimed %v, want every new key", claimed)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	st := benchmarks.StoreSQL(store)
	tracer.mu.Lock()
	defer tracer.mu.Unlock()
	for what, sql := range map[string]string{
		"IsProcessed, StoreSQL's Check":          st.Check,
		"MarkProcessed, StoreSQL's Mark":         st.Mark,
		"Transact, ClaimSQL":                     benchmarks.ClaimSQL(store),
		"TransactBatch of 3 keys, ClaimBatchSQL": benchmarks.ClaimBatchSQL(store),
	} {
		if n := tracer.sent[sql]; n != 1 {
			t.Errorf("%s: sent %d times, want once; sent %v", what, n, tracer.sent)
		}
	}
	if !strings.Contains(st.Check, "processed_at > now() - interval '86400000000 microseconds'") {
		t.Errorf("the check does not count the default window: %s", st.Check)
	}
}
