package embedded

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kfake"
)

// slogAdapter passes kfake's log lines to a slog.Logger.
type slogAdapter struct {
	logger *slog.Logger
}

func (a slogAdapter) Logf(level kfake.LogLevel, format string, args ...any) {
	l := slogLevel(level)
	ctx := context.Background()
	if !a.logger.Enabled(ctx, l) {
		return
	}
	a.logger.Log(ctx, l, fmt.Sprintf(format, args...), slog.String("component", "kfake"))
}

// slogLevel maps kfake's levels to slog's. kfake's info level carries one
// line per request, which is debug detail for anyone running the broker.
func slogLevel(level kfake.LogLevel) slog.Level {
	switch level {
	case kfake.LogLevelError:
		return slog.LevelError
	case kfake.LogLevelWarn:
		return slog.LevelWarn
	case kfake.LogLevelInfo:
		return slog.LevelDebug
	default:
		return slog.LevelDebug - 4
	}
}
