package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
)

// CleanupWindow is the window of the store the cleanup benchmark runs on;
// the rows it fills the table with are older.
const CleanupWindow = time.Hour

// Cleanup measures the PostgreSQL store's Cleanup on a table filled with
// expired marks: how fast it deletes them, and what it does to the latency
// of the marks that consumers keep making meanwhile.
type Cleanup struct {
	pool  *pgxpool.Pool
	store *postgres.Store
}

// NewCleanup makes a store on pool in schema (created by the store; the
// caller drops it), with CleanupWindow and no background cleanup. Close it
// when done.
func NewCleanup(ctx context.Context, pool *pgxpool.Pool, schema string) (*Cleanup, error) {
	store, err := postgres.NewStore(pool, postgres.Config{Schema: schema, Window: CleanupWindow, CleanupInterval: -1})
	if err != nil {
		return nil, err
	}
	if err := store.EnsureSchema(ctx); err != nil {
		return nil, errors.Join(err, store.Close())
	}
	return &Cleanup{pool: pool, store: store}, nil
}

// Close stops the store.
func (c *Cleanup) Close() error { return c.store.Close() }

// Store returns the store measured.
func (c *Cleanup) Store() *postgres.Store { return c.store }

// Fill inserts rows expired marks with random keys (as scoped keys are,
// through idempotency.KeyUUID). It drops the table's indexes, inserts, and
// builds them again, which is several times faster than inserting into
// them, then analyzes the table.
func (c *Cleanup) Fill(ctx context.Context, rows int) error {
	table := c.store.Table()
	return pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		restore, err := dropIndexes(ctx, tx, table)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+table+" (message_id, processed_at)"+
			" SELECT gen_random_uuid(), now() - $1::interval - g * interval '1 microsecond'"+
			" FROM generate_series(1, $2::int) g", 2*CleanupWindow, rows); err != nil {
			return fmt.Errorf("fill %s: %w", table, err)
		}
		for _, stmt := range restore {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("restore index of %s: %w", table, err)
			}
		}
		_, err = tx.Exec(ctx, "ANALYZE "+table)
		return err
	})
}

// dropIndexes drops the constraints and indexes of table (a qualified,
// quoted name) in tx and returns the statements that make them again.
func dropIndexes(ctx context.Context, tx pgx.Tx, table string) (restore []string, err error) {
	rows, err := tx.Query(ctx, "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = $1::regclass", table)
	if err != nil {
		return nil, err
	}
	cons, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, Def string }])
	if err != nil {
		return nil, err
	}
	for _, con := range cons {
		name := pgx.Identifier{con.Name}.Sanitize()
		if _, err := tx.Exec(ctx, "ALTER TABLE "+table+" DROP CONSTRAINT "+name); err != nil {
			return nil, err
		}
		restore = append(restore, "ALTER TABLE "+table+" ADD CONSTRAINT "+name+" "+con.Def)
	}
	rows, err = tx.Query(ctx, "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = $1::regclass", table)
	if err != nil {
		return nil, err
	}
	idx, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, Def string }])
	if err != nil {
		return nil, err
	}
	for _, ix := range idx {
		if _, err := tx.Exec(ctx, "DROP INDEX "+ix.Name); err != nil {
			return nil, err
		}
		restore = append(restore, ix.Def)
	}
	return restore, nil
}

// Marks makes new marks (MarkProcessed of new keys) from callers
// goroutines until ctx ends or stop is closed, and returns the latency of
// each.
func (c *Cleanup) Marks(ctx context.Context, callers int, stop <-chan struct{}) ([]time.Duration, error) {
	var (
		mu       sync.Mutex
		all      []time.Duration
		once     sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	for range max(callers, 1) {
		wg.Go(func() {
			var mine []time.Duration
			defer func() { mu.Lock(); all = append(all, mine...); mu.Unlock() }()
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				start := time.Now()
				if err := c.store.MarkProcessed(ctx, uuid.Must(uuid.NewV7()).String()); err != nil {
					if ctx.Err() == nil {
						once.Do(func() { firstErr = err })
					}
					return
				}
				mine = append(mine, time.Since(start))
			}
		})
	}
	wg.Wait()
	return all, firstErr
}

// CleanupResult is what MeasureCleanup measured.
type CleanupResult struct {
	// Rows is how many expired marks the table held; Deleted how many the
	// pass deleted, in Elapsed.
	Rows, Deleted int64
	Elapsed       time.Duration
	// Quiet is the latency of marks made without a cleanup running;
	// During of those made while it ran.
	Quiet, During Latency
	// QuietMarks and DuringMarks are how many marks each made.
	QuietMarks, DuringMarks int
}

// Rate returns rows deleted per second.
func (r CleanupResult) Rate() float64 { return rate(int(r.Deleted), r.Elapsed) }

// MeasureCleanup fills the table with rows expired marks, makes marks from
// callers goroutines for quiet (half before the pass and half after it),
// and runs one Cleanup pass while the same callers keep making marks.
func MeasureCleanup(ctx context.Context, c *Cleanup, rows, callers int, quiet time.Duration) (CleanupResult, error) {
	r := CleanupResult{Rows: int64(rows)}
	if err := c.Fill(ctx, rows); err != nil {
		return r, err
	}
	before, err := c.marksFor(ctx, callers, quiet/2)
	if err != nil {
		return r, err
	}
	stop := make(chan struct{})
	var during []time.Duration
	var markErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		during, markErr = c.Marks(ctx, callers, stop)
	}()
	start := time.Now()
	r.Deleted, err = c.store.Cleanup(ctx)
	r.Elapsed = time.Since(start)
	close(stop)
	<-done
	if err = errors.Join(err, markErr); err != nil {
		return r, err
	}
	after, err := c.marksFor(ctx, callers, quiet/2)
	if err != nil {
		return r, err
	}
	quietAll := slices.Concat(before, after)
	r.Quiet, r.QuietMarks = summarise(quietAll), len(quietAll)
	r.During, r.DuringMarks = summarise(during), len(during)
	return r, nil
}

// marksFor makes marks from callers goroutines for d.
func (c *Cleanup) marksFor(ctx context.Context, callers int, d time.Duration) ([]time.Duration, error) {
	stop := make(chan struct{})
	t := time.AfterFunc(d, func() { close(stop) })
	defer t.Stop()
	return c.Marks(ctx, callers, stop)
}
