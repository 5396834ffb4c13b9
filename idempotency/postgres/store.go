package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/internal/config"
)

// Store is the PostgreSQL idempotency store. It is safe for concurrent use.
// Make it with NewStore and Close it to stop its background cleanup; the
// pool stays yours to close.
type Store struct {
	pool *pgxpool.Pool
	cfg  Config
	sql  statements

	checks, marks combiner // IsProcessed and MarkProcessed of concurrent callers

	ready atomic.Bool   // the table is known to exist
	setup chan struct{} // held by the goroutine creating or checking the table

	stop context.CancelFunc
	wg   sync.WaitGroup
}

var _ idempotency.Store = (*Store)(nil)

// NewStore returns a Store that keeps its marks in pool's database, as cfg
// says (zero fields mean their defaults). It refuses an invalid cfg with an
// error that wraps ErrInvalidConfig and names the field. NewStore itself
// does not touch the database: the table is created, or checked, on first
// use (or by EnsureSchema). The background cleanup, unless disabled, starts
// its first pass right away, which is such a first use.
func NewStore(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, config.Invalid("postgres.NewStore", "", "got a nil pool; pass a connected *pgxpool.Pool")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Store{
		pool:  pool,
		cfg:   cfg,
		sql:   buildStatements(cfg),
		setup: make(chan struct{}, 1),
		stop:  stop,
	}
	s.checks.send, s.marks.send = s.sendChecks, s.sendMarks
	s.checks.limit = inFlightLimit(pool.Config().MaxConns)
	s.marks.limit = s.checks.limit
	if cfg.CleanupInterval > 0 {
		s.wg.Go(func() { s.cleanupLoop(ctx) })
	}
	return s, nil
}

// IsProcessed reports whether key has a mark younger than the window.
// Concurrent calls share statements (see the package doc).
func (s *Store) IsProcessed(ctx context.Context, key string) (bool, error) {
	if err := s.ensure(ctx); err != nil {
		return false, err
	}
	done, err := s.checks.do(ctx, idempotency.KeyUUID(key))
	if err != nil {
		return false, unavailable("is processed", err)
	}
	return done, nil
}

// MarkProcessed marks key as processed now. Marking a key with a fresh mark
// changes nothing; a mark older than the window is renewed. Its commit does
// not wait for the WAL flush, and concurrent calls share statements (see
// the package doc).
func (s *Store) MarkProcessed(ctx context.Context, key string) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	if _, err := s.marks.do(ctx, idempotency.KeyUUID(key)); err != nil {
		return unavailable("mark processed", err)
	}
	return nil
}

// sendChecks runs the check of keys: the statement of one key alone, or
// that of several.
func (s *Store) sendChecks(ctx context.Context, keys []pgtype.UUID) (map[[16]byte]bool, error) {
	if len(keys) == 1 {
		var done bool
		err := s.pool.QueryRow(ctx, s.sql.isProcessed, keys[0]).Scan(&done)
		return map[[16]byte]bool{keys[0].Bytes: done}, err
	}
	rows, err := s.pool.Query(ctx, s.sql.checkMany, keys)
	if err != nil {
		return nil, err
	}
	found := map[[16]byte]bool{}
	var k pgtype.UUID
	_, err = pgx.ForEachRow(rows, []any{&k}, func() error {
		found[k.Bytes] = true
		return nil
	})
	return found, err
}

// sendMarks marks keys, in ascending order, so that statements marking
// some of the same keys lock them in the same order.
func (s *Store) sendMarks(ctx context.Context, keys []pgtype.UUID) (map[[16]byte]bool, error) {
	var err error
	if len(keys) == 1 {
		_, err = s.pool.Exec(ctx, s.sql.mark, keys[0])
	} else {
		_, err = s.pool.Exec(ctx, s.sql.markMany, keys)
	}
	return nil, err
}

// Close stops the background cleanup and waits for it to return. The Store
// keeps answering after Close; the pool is not closed. Close is safe to call
// more than once and always returns nil.
func (s *Store) Close() error {
	s.stop()
	s.wg.Wait()
	return nil
}

// Window returns how long a mark counts.
func (s *Store) Window() time.Duration { return s.cfg.Window }

// Table returns the store's table as it appears in its SQL, schema
// included, quoted where needed.
func (s *Store) Table() string { return s.sql.qualified }

// keyArg is the argument a key is stored under: its KeyUUID.
func keyArg(key string) pgtype.UUID {
	return pgtype.UUID{Bytes: idempotency.KeyUUID(key), Valid: true}
}
