package postgres_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// newStore makes a Store that Close stops when the test ends. Unless cfg
// says otherwise, it has no background cleanup and logs nothing.
func newStore(t *testing.T, pool *pgxpool.Pool, cfg postgres.Config) *postgres.Store {
	t.Helper()
	if cfg.CleanupInterval == 0 {
		cfg.CleanupInterval = -1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := postgres.NewStore(pool, cfg)
	if err != nil {
		t.Fatalf("NewStore: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustMark(t *testing.T, s idempotency.Store, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if err := s.MarkProcessed(ctxT(t), k); err != nil {
			t.Fatalf("MarkProcessed(%q): %v", k, err)
		}
	}
}

func isProcessed(t *testing.T, s idempotency.Store, key string) bool {
	t.Helper()
	ok, err := s.IsProcessed(ctxT(t), key)
	if err != nil {
		t.Fatalf("IsProcessed(%q): %v", key, err)
	}
	return ok
}

// ageMark moves the mark of key back in time by age.
func ageMark(t *testing.T, pool *pgxpool.Pool, s *postgres.Store, key string, age time.Duration) {
	t.Helper()
	pgtest.Exec(t, pool, "UPDATE "+s.Table()+" SET processed_at = now() - make_interval(secs => $2) WHERE message_id = $1", idempotency.KeyUUID(key), age.Seconds())
}

func relationExists(t *testing.T, pool *pgxpool.Pool, schema, name string) bool {
	t.Helper()
	return pgtest.QueryInt(t, pool, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2`, schema, name) == 1
}

func schemaExists(t *testing.T, pool *pgxpool.Pool, schema string) bool {
	t.Helper()
	return pgtest.QueryInt(t, pool, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema) == 1
}

func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + "/" + strconv.Itoa(i)
	}
	return out
}

func newUUIDKey() string { return uuid.Must(uuid.NewV7()).String() }

func quoted(name string) string { return pgx.Identifier{name}.Sanitize() }

// batchLog is a slog handler that records the cleanup's batches and can
// hold the cleanup between two batches.
type batchLog struct {
	mu      sync.Mutex
	batches []int64
	onBatch func(n int) // called with the batch's number, from 1, outside mu
}

func (h *batchLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *batchLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *batchLog) WithGroup(string) slog.Handler            { return h }

func (h *batchLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "idempotency cleanup batch" {
		return nil
	}
	var deleted int64
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "deleted" {
			deleted = a.Value.Int64()
		}
		return true
	})
	h.mu.Lock()
	h.batches = append(h.batches, deleted)
	n := len(h.batches)
	h.mu.Unlock()
	if h.onBatch != nil {
		h.onBatch(n)
	}
	return nil
}

func (h *batchLog) recorded() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int64(nil), h.batches...)
}

func keyUUID(key string) uuid.UUID { return idempotency.KeyUUID(key) }

func slogger(h slog.Handler) *slog.Logger { return slog.New(h) }
