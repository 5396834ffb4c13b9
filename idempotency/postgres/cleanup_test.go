package postgres_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

const (
	expiredRows = 200_000
	freshRows   = 1_000
	// defaultCleanupBatchSize is Config.CleanupBatchSize's documented
	// default.
	defaultCleanupBatchSize = 5000
)

// TestCleanupDeletesExactlyExpiredInBatches fills the table with 200 000
// expired and 1 000 fresh marks in one statement, then runs one Cleanup. It
// holds the cleanup after its first batch until MarkProcessed calls have
// succeeded, and keeps marking until the pass is over.
func TestCleanupDeletesExactlyExpiredInBatches(t *testing.T) {
	pool := pgtest.Pool(t)
	log := &batchLog{}
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool), Window: time.Hour, Logger: slogger(log)})
	if err := s.EnsureSchema(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, pool, "INSERT INTO "+s.Table()+` (message_id, processed_at)
		SELECT gen_random_uuid(), now() - CASE WHEN g <= $1 THEN interval '2 hours' ELSE interval '30 minutes' END
			- g * interval '1 millisecond'
		FROM generate_series(1, $2::int) g`, expiredRows, expiredRows+freshRows)

	firstBatch, resume := make(chan struct{}), make(chan struct{})
	var visibleAfterFirst int64
	log.onBatch = func(n int) {
		if n == 1 {
			// Another connection already sees the first batch gone: it
			// was committed on its own.
			visibleAfterFirst = pgtest.QueryInt(t, pool, "SELECT count(*) FROM "+s.Table())
			close(firstBatch)
			<-resume
		}
	}
	var marked atomic.Int64
	markErr := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		markErr <- markUntil(s, firstBatch, resume, done, &marked)
	}()

	deleted, err := s.Cleanup(ctxT(t))
	close(done)
	if err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if err := <-markErr; err != nil {
		t.Fatalf("MarkProcessed during the cleanup: %v", err)
	}
	if deleted != expiredRows {
		t.Fatalf("Cleanup deleted %d rows, want exactly the %d expired", deleted, expiredRows)
	}
	left := pgtest.QueryInt(t, pool, "SELECT count(*) FROM "+s.Table())
	if want := freshRows + marked.Load(); left != want {
		t.Fatalf("%d rows left, want the %d fresh ones and %d marked during the cleanup", left, freshRows, marked.Load())
	}
	if want := int64(expiredRows + freshRows - defaultCleanupBatchSize); visibleAfterFirst != want {
		t.Fatalf("after the first batch other connections see %d rows, want %d", visibleAfterFirst, want)
	}
	batches := log.recorded()
	var sum int64
	for _, n := range batches {
		if n > defaultCleanupBatchSize {
			t.Fatalf("a batch deleted %d rows, more than %d", n, defaultCleanupBatchSize)
		}
		sum += n
	}
	if want := expiredRows / defaultCleanupBatchSize; len(batches) != want || sum != expiredRows {
		t.Fatalf("%d batches deleting %d rows, want %d batches deleting %d", len(batches), sum, want, expiredRows)
	}
}

// markUntil marks fresh keys: a first round while the cleanup waits between
// batches (then it lets the cleanup go on), and more until done.
func markUntil(s *postgres.Store, firstBatch <-chan struct{}, resume chan<- struct{}, done <-chan struct{}, marked *atomic.Int64) error {
	mark := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.MarkProcessed(ctx, newUUIDKey()); err != nil {
			return err
		}
		marked.Add(1)
		return nil
	}
	<-firstBatch
	for range 20 {
		if err := mark(); err != nil {
			close(resume)
			return err
		}
	}
	close(resume)
	for {
		select {
		case <-done:
			return nil
		default:
		}
		if err := mark(); err != nil {
			return err
		}
	}
}

// TestCleanupOneAtATime holds one store's cleanup between two batches; a
// second store on the same table gets ErrCleanupBusy meanwhile.
func TestCleanupOneAtATime(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	log := &batchLog{}
	cfg := postgres.Config{Schema: schema, Window: time.Hour, CleanupBatchSize: 5}
	first := newStore(t, pool, postgres.Config{Schema: schema, Window: time.Hour, CleanupBatchSize: 5, Logger: slogger(log)})
	second := newStore(t, pgtest.Pool(t), cfg)
	if err := first.EnsureSchema(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, pool, "INSERT INTO "+first.Table()+" SELECT gen_random_uuid(), now() - interval '2 hours' FROM generate_series(1, 20)")

	held, resume := make(chan struct{}), make(chan struct{})
	log.onBatch = func(n int) {
		if n == 1 {
			close(held)
			<-resume
		}
	}
	result := make(chan int64, 1)
	go func() {
		n, err := first.Cleanup(ctxT(t))
		if err != nil {
			t.Error(err)
		}
		result <- n
	}()
	<-held
	n, err := second.Cleanup(ctxT(t))
	close(resume)
	if !errors.Is(err, postgres.ErrCleanupBusy) || n != 0 {
		t.Fatalf("second Cleanup during the first = %d, %v; want 0, ErrCleanupBusy", n, err)
	}
	if n := <-result; n != 20 {
		t.Fatalf("first Cleanup deleted %d, want 20", n)
	}
	if n, err := second.Cleanup(ctxT(t)); err != nil || n != 0 {
		t.Fatalf("second Cleanup after the first = %d, %v; want 0, nil", n, err)
	}
}

// TestBackgroundCleanup runs the cleanup every few milliseconds until it has
// deleted the expired marks, then checks that Close stops its goroutine.
func TestBackgroundCleanup(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	setup := newStore(t, pool, postgres.Config{Schema: schema})
	if err := setup.EnsureSchema(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, pool, "INSERT INTO "+setup.Table()+" SELECT gen_random_uuid(), now() - interval '2 hours' FROM generate_series(1, 30)")
	mustMark(t, setup, "fresh")

	ignore := goleak.IgnoreCurrent()
	s := newStore(t, pool, postgres.Config{Schema: schema, Window: time.Hour, CleanupInterval: 10 * time.Millisecond})
	deadline := time.Now().Add(10 * time.Second)
	for pgtest.QueryInt(t, pool, "SELECT count(*) FROM "+s.Table()) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the background cleanup did not delete the expired marks")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignore)
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if !isProcessed(t, s, "fresh") {
		t.Fatal("store does not answer after Close")
	}
}

// TestCleanupSkipsMarksBeingRenewed expires 30 marks and renews one of them
// in a transaction left open: the pass deletes the other 29 without waiting
// for it, and the renewed mark stays once it commits.
func TestCleanupSkipsMarksBeingRenewed(t *testing.T) {
	pool := pgtest.Pool(t)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool), Window: time.Hour, CleanupBatchSize: 7})
	keys := keys("renew", 30)
	mustMark(t, s, keys...)
	for _, k := range keys {
		ageMark(t, pool, s, k, 2*time.Hour)
	}
	tx, err := pool.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if claimed, err := s.MarkProcessedTx(ctxT(t), tx, keys[3]); err != nil || !claimed {
		t.Fatalf("renewing an expired mark: claimed %v, %v", claimed, err)
	}
	deleted, err := s.Cleanup(ctxT(t)) // would wait for tx if it did not skip the row
	if err != nil || deleted != 29 {
		t.Fatalf("Cleanup while a mark is being renewed = %d, %v; want 29, nil", deleted, err)
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := pgtest.QueryInt(t, pool, "SELECT count(*) FROM "+s.Table()); n != 1 || !isProcessed(t, s, keys[3]) {
		t.Fatalf("%d marks left after the pass, want only the renewed one", n)
	}
}

// TestCleanupEndsWithContextBetweenBatches cancels a pass after its first
// batch: Cleanup returns in its pause with that batch counted, the rows of
// the batches it did not run left, and an error that wraps the
// cancellation; a later pass deletes the rest.
func TestCleanupEndsWithContextBetweenBatches(t *testing.T) {
	pool := pgtest.Pool(t)
	log := &batchLog{}
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool), Window: time.Hour, CleanupBatchSize: 5, Logger: slogger(log)})
	if err := s.EnsureSchema(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, pool, "INSERT INTO "+s.Table()+" SELECT gen_random_uuid(), now() - interval '2 hours' FROM generate_series(1, 20)")
	ctx, cancel := context.WithCancel(ctxT(t))
	log.onBatch = func(n int) {
		if n == 1 {
			cancel()
		}
	}
	deleted, err := s.Cleanup(ctx)
	if deleted != 5 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Cleanup cancelled after its first batch = %d, %v; want 5 and context.Canceled", deleted, err)
	}
	if n := pgtest.QueryInt(t, pool, "SELECT count(*) FROM "+s.Table()); n != 15 {
		t.Fatalf("%d marks left after the cancelled pass, want 15", n)
	}
	log.onBatch = nil
	if deleted, err := s.Cleanup(ctxT(t)); deleted != 15 || err != nil {
		t.Fatalf("the next pass = %d, %v; want 15, nil", deleted, err)
	}
}
