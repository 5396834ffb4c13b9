package postgres

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// cleanupLoop runs a cleanup pass now and then every CleanupInterval until
// ctx ends. Passes that fail are logged and tried again at the next tick.
func (s *Store) cleanupLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.CleanupInterval)
	defer t.Stop()
	for {
		s.backgroundCleanup(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// backgroundCleanup runs one pass and logs how it went.
func (s *Store) backgroundCleanup(ctx context.Context) {
	deleted, err := s.Cleanup(ctx)
	switch {
	case ctx.Err() != nil:
		return // the store is closing
	case err == nil:
		s.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "idempotency cleanup done",
			slog.String("table", s.sql.qualified), slog.Int64("deleted", deleted))
	case errors.Is(err, ErrCleanupBusy):
		s.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "idempotency cleanup skipped: another store is cleaning",
			slog.String("table", s.sql.qualified))
	default:
		s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "idempotency cleanup failed",
			slog.String("table", s.sql.qualified), slog.Int64("deleted", deleted), slog.Any("error", err))
	}
}
