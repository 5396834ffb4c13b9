package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/internal/retry"
)

// unlockTimeout bounds releasing the cleanup lock after a pass.
const unlockTimeout = 5 * time.Second

// Cleanup deletes the marks older than the window in one pass: batches of
// at most CleanupBatchSize rows, each DELETE its own short transaction, until
// a batch finds fewer, so it never holds long locks on a large table. It
// pauses between batches for as long as the last one took, so that the
// marks consumers make meanwhile keep their latency. Rows locked by a
// concurrent claim are skipped. Only one Store cleans a table at a time,
// across processes: when another pass is running, Cleanup
// returns 0 and an error wrapping ErrCleanupBusy. deleted counts the rows
// deleted, also when an error ends the pass early.
func (s *Store) Cleanup(ctx context.Context) (deleted int64, err error) {
	if err := s.ensure(ctx); err != nil {
		return 0, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, unavailable("cleanup", err)
	}
	var locked bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1::int4, $2::int4)",
		lockClassCleanup, lockObject(s.sql.qualified)).Scan(&locked); err != nil {
		conn.Release()
		return 0, unavailable("cleanup lock", err)
	}
	if !locked {
		conn.Release()
		return 0, fmt.Errorf("%w: another store is cleaning %s", ErrCleanupBusy, s.sql.qualified)
	}
	defer s.unlockCleanup(ctx, conn)
	return s.deleteExpired(ctx, conn)
}

// maxCleanupPause bounds the pause between two batches.
const maxCleanupPause = time.Second

// deleteExpired deletes expired marks batch by batch on conn. After each
// full batch it pauses for as long as the batch took (at most
// maxCleanupPause), so that a pass keeps at most about half of a backend
// busy and the marks that consumers make meanwhile keep their latency.
func (s *Store) deleteExpired(ctx context.Context, conn *pgxpool.Conn) (int64, error) {
	var total int64
	for {
		start := time.Now()
		tag, err := conn.Exec(ctx, s.sql.cleanup, s.cfg.CleanupBatchSize)
		if err != nil {
			return total, unavailable("cleanup", err)
		}
		n := tag.RowsAffected()
		total += n
		if n > 0 {
			s.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "idempotency cleanup batch",
				slog.String("table", s.sql.qualified), slog.Int64("deleted", n))
		}
		if n < int64(s.cfg.CleanupBatchSize) {
			return total, nil
		}
		if err := retry.Sleep(ctx, min(time.Since(start), maxCleanupPause)); err != nil {
			return total, unavailable("cleanup", err)
		}
	}
}

// unlockCleanup releases the cleanup lock and gives conn back to the pool.
// If the lock cannot be released, the connection is closed instead, which
// releases it too.
func (s *Store) unlockCleanup(ctx context.Context, conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
	defer cancel()
	var released bool
	err := conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1::int4, $2::int4)",
		lockClassCleanup, lockObject(s.sql.qualified)).Scan(&released)
	if err != nil || !released {
		_ = conn.Conn().Close(ctx)
	}
	conn.Release()
}
