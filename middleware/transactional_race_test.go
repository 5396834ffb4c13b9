package middleware_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
)

// raceEnv is a transactional middleware called directly, without a
// router, by goroutines that deliver the same message at once.
type raceEnv struct {
	pool       *pgxpool.Pool
	schema     string
	store      *postgres.Store
	fx         *effects
	duplicates atomic.Int64
}

func newRaceEnv(t *testing.T) *raceEnv {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	e := &raceEnv{pool: pool, schema: schema, store: postgresStoreIn(t, pool, schema), fx: newEffects(t, pool, schema)}
	if err := e.store.EnsureSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// wrap returns h behind Idempotency in the transactional mode with a
// fixed scope.
func (e *raceEnv) wrap(t *testing.T, h message.NoPublishHandlerFunc) message.HandlerFunc {
	t.Helper()
	return e.wrapWith(t, false, h)
}

// wrapWith is wrap, with IdempotencyConfig.DeferClaim set unless
// claimFirst.
func (e *raceEnv) wrapWith(t *testing.T, claimFirst bool, h message.NoPublishHandlerFunc) message.HandlerFunc {
	t.Helper()
	mw, err := middleware.Idempotency(e.store, middleware.IdempotencyConfig{
		Transactional: true,
		Scope:         func(*message.Message) string { return "race" },
		OnDuplicate:   func(*message.Message, string, string) { e.duplicates.Add(1) },
		DeferClaim:    !claimFirst,
	})
	if err != nil {
		t.Fatal(err)
	}
	return mw(func(msg *message.Message) ([]*message.Message, error) { return nil, h(msg) })
}

// waitingClaims returns how many sessions wait on a lock while running a
// statement on this test's schema: deliveries blocked on a claim.
func (e *raceEnv) waitingClaims(t *testing.T) int {
	t.Helper()
	var n int
	err := e.pool.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position($1 in query) > 0",
		e.schema).Scan(&n)
	if err != nil {
		t.Fatalf("pg_stat_activity: %v", err)
	}
	return n
}

// TestTransactionalConcurrentDuplicateWaits: a second delivery of a message
// whose first delivery is still in its handler waits on the claim. When
// the first commits, the second is a duplicate; when it rolls back, the
// second runs the handler. Either way the effect is committed once. With
// the claim deferred to the first statement (DeferClaim), the second
// delivery's handler starts and its statement, which carries the claim,
// fails with postgres.ErrDuplicate; with the claim first (the default) the handler
// is not called for it.
func TestTransactionalConcurrentDuplicateWaits(t *testing.T) {
	for _, claimFirst := range []bool{false, true} {
		for _, firstFails := range []bool{false, true} {
			name := map[bool]string{false: "first commits", true: "first rolls back"}[firstFails] +
				map[bool]string{false: ", deferred claim", true: ", claim before handler"}[claimFirst]
			t.Run(name, func(t *testing.T) {
				testConcurrentDuplicate(t, claimFirst, firstFails)
			})
		}
	}
}

func testConcurrentDuplicate(t *testing.T, claimFirst, firstFails bool) {
	e := newRaceEnv(t)
	inside, release := make(chan struct{}), make(chan struct{})
	var calls, duplicateErrs atomic.Int64
	handler := e.wrapWith(t, claimFirst, func(msg *message.Message) error {
		first := calls.Add(1) == 1
		if err := e.fx.insert(msg); err != nil {
			if errors.Is(err, postgres.ErrDuplicate) {
				duplicateErrs.Add(1)
			}
			return err
		}
		if !first {
			return nil
		}
		close(inside)
		<-release
		if firstFails {
			return errors.New("first delivery fails")
		}
		return nil
	})
	msg := newMessages(1)[0]
	errs := make(chan error, 2)
	go func() { _, err := handler(msg); errs <- err }()
	<-inside
	go func() { _, err := handler(kototest.Republish(msg)); errs <- err }()
	kototest.WaitFor(t, "the second delivery to wait on the claim", func() bool { return e.waitingClaims(t) == 1 })
	close(release)
	first, second := <-errs, <-errs
	if (first != nil) != firstFails || second != nil {
		t.Errorf("deliveries returned %v and %v", first, second)
	}
	wantCalls, wantDup, wantDupErrs := int64(1), int64(1), int64(0)
	switch {
	case firstFails:
		wantCalls, wantDup = 2, 0
	case !claimFirst:
		wantCalls, wantDupErrs = 2, 1
	}
	if calls.Load() != wantCalls || e.duplicates.Load() != wantDup || duplicateErrs.Load() != wantDupErrs {
		t.Errorf("handler called %d times, %d duplicates, %d ErrDuplicate; want %d, %d and %d",
			calls.Load(), e.duplicates.Load(), duplicateErrs.Load(), wantCalls, wantDup, wantDupErrs)
	}
	if rows, _ := e.fx.counts(); rows != 1 {
		t.Errorf("%d effect rows, want 1", rows)
	}
}

// TestTransactionalRacingDeliveries: 4 goroutines deliver the same 50
// messages at once; each message's effect is committed once and every
// other delivery is a duplicate.
func TestTransactionalRacingDeliveries(t *testing.T) {
	e := newRaceEnv(t)
	handler := e.wrap(t, e.fx.insert)
	msgs := newMessages(50)
	const deliveries = 4
	var wg sync.WaitGroup
	for g := range deliveries {
		wg.Go(func() {
			for i := range msgs {
				m := kototest.Republish(msgs[(i+g*7)%len(msgs)]) // each goroutine in its own order
				if _, err := handler(m); err != nil {
					t.Errorf("delivery of %s: %v", m.UUID, err)
				}
			}
		})
	}
	wg.Wait()
	rows, distinct := e.fx.counts()
	if rows != len(msgs) || distinct != len(msgs) {
		t.Errorf("%d effect rows for %d distinct messages, want %d of each", rows, distinct, len(msgs))
	}
	if d := e.duplicates.Load(); d != (deliveries-1)*int64(len(msgs)) {
		t.Errorf("%d duplicates, want %d", d, (deliveries-1)*len(msgs))
	}
}

// TestTransactionalDeferredClaim: with the claim deferred to the first
// statement, a handler that writes nothing still claims (BEGIN, claim and
// COMMIT go together), so its redelivery is a duplicate; a claim that
// fails because the database is gone is an outage, whatever the handler
// made of its statement's error.
func TestTransactionalDeferredClaim(t *testing.T) {
	e := newRaceEnv(t)
	var calls atomic.Int64
	noop := e.wrap(t, func(*message.Message) error { calls.Add(1); return nil })
	msg := newMessages(1)[0]
	for range 2 {
		if _, err := noop(kototest.Republish(msg)); err != nil {
			t.Fatal(err)
		}
	}
	if calls.Load() != 2 || e.duplicates.Load() != 1 {
		t.Errorf("a handler without statements: called %d times, %d duplicates; want 2 and 1", calls.Load(), e.duplicates.Load())
	}

	own, err := pgxpool.NewWithConfig(context.Background(), pgtest.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	store := postgresStoreIn(t, own, e.schema)
	mw, err := middleware.Idempotency(store, middleware.IdempotencyConfig{Transactional: true})
	if err != nil {
		t.Fatal(err)
	}
	own.Close()
	swallowing := mw(func(msg *message.Message) ([]*message.Message, error) {
		tx, _ := postgres.TxFromContext(msg.Context())
		_, _ = tx.Exec(msg.Context(), "SELECT $1::int", 1)
		return nil, errors.New("the handler's own error")
	})
	_, err = swallowing(newMessages(1)[0])
	if koto.ClassOf(err) != koto.ClassOutage || !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Errorf("a failed deferred claim returned %v (class %v), want an outage wrapping ErrStoreUnavailable", err, koto.ClassOf(err))
	}
}
