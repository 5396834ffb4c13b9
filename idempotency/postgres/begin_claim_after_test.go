package postgres_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/pgtest"
)

// TestBeginClaimAfter: the statements queued by before run inside the new
// transaction, before its first write (the claim), in the one round trip
// of BeginClaim; a failing one ends the transaction, claims nothing and
// keeps no connection.
func TestBeginClaimAfter(t *testing.T) {
	var writes atomic.Int64
	pool := countingPool(t, &writes, nil)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	if err := s.EnsureSchema(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// Records, transaction-local, whether the transaction had written.
	before := func(b *pgx.Batch) {
		b.Queue("SELECT pg_advisory_xact_lock(4242)")
		b.Queue("SELECT set_config('koto.unwritten', (pg_current_xact_id_if_assigned() IS NULL)::text, true)")
	}
	for i := range 2 { // the first on the connection also prepares its statements
		key := newUUIDKey()
		start := writes.Load()
		tx, claimed, err := s.BeginClaimAfter(ctxT(t), key, before)
		if err != nil || !claimed {
			t.Fatalf("BeginClaimAfter = %v, %v", claimed, err)
		}
		if n := writes.Load() - start; i == 1 && n != 1 {
			t.Errorf("BeginClaimAfter wrote to the server %d times, want once", n)
		}
		var unwritten string
		var locks int
		err = tx.QueryRow(ctxT(t), `SELECT current_setting('koto.unwritten'),
			(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())`).Scan(&unwritten, &locks)
		if err != nil || unwritten != "true" || locks != 1 {
			t.Fatalf("in the transaction: unwritten before the statements = %q, advisory locks %d, %v; want true, 1", unwritten, locks, err)
		}
		if err := tx.Commit(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if !isProcessed(t, s, key) {
			t.Fatal("the claim after the statements left no mark")
		}
	}

	key := newUUIDKey()
	tx, claimed, err := s.BeginClaimAfter(ctxT(t), key, func(b *pgx.Batch) { b.Queue("SELECT 1/0") })
	if err == nil || claimed || tx != nil || !strings.Contains(err.Error(), "division by zero") {
		t.Fatalf("BeginClaimAfter with a failing statement = %v, %v, %v; want its error and nothing open", tx, claimed, err)
	}
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d connections held after a failed statement", n)
	}
	if isProcessed(t, s, key) {
		t.Fatal("a claim after a failed statement left a mark")
	}
}
