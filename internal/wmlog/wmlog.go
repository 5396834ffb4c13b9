// Package wmlog adapts a *slog.Logger to Watermill's LoggerAdapter for the
// project's Kafka clients.
package wmlog

import (
	"context"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill"
)

// Plumbing adapts logger for Watermill's clients: their info lines
// (subscribing, reconnecting, closing) become debug lines, since they
// describe plumbing, not the service's work. Unlike Watermill's own slog
// adapter, it checks the level before it builds the record, because the
// Kafka clients log several trace and debug lines for every message.
func Plumbing(logger *slog.Logger) watermill.LoggerAdapter {
	return slogAdapter{logger: logger, info: slog.LevelDebug}
}

// Business adapts logger keeping info lines at info, for the clients whose
// info lines are the service's business (a partition resumed after a fault).
func Business(logger *slog.Logger) watermill.LoggerAdapter {
	return slogAdapter{logger: logger, info: slog.LevelInfo}
}

type slogAdapter struct {
	logger *slog.Logger
	info   slog.Level // the level of Info lines
}

// Error logs at error level.
func (a slogAdapter) Error(msg string, err error, fields watermill.LogFields) {
	a.log(slog.LevelError, msg, fields, "error", err)
}

// Info logs at the adapter's info level.
func (a slogAdapter) Info(msg string, fields watermill.LogFields) {
	a.log(a.info, msg, fields)
}

// Debug logs at debug level.
func (a slogAdapter) Debug(msg string, fields watermill.LogFields) {
	a.log(slog.LevelDebug, msg, fields)
}

// Trace logs at watermill.LevelTrace, below debug.
func (a slogAdapter) Trace(msg string, fields watermill.LogFields) {
	a.log(watermill.LevelTrace, msg, fields)
}

// With returns an adapter that adds fields to every line.
func (a slogAdapter) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return slogAdapter{logger: a.logger.With(fieldArgs(fields)...), info: a.info}
}

func (a slogAdapter) log(level slog.Level, msg string, fields watermill.LogFields, extra ...any) {
	ctx := context.Background()
	if !a.logger.Enabled(ctx, level) {
		return
	}
	a.logger.Log(ctx, level, msg, append(fieldArgs(fields), extra...)...)
}

func fieldArgs(fields watermill.LogFields) []any {
	args := make([]any, 0, 2*len(fields))
	for k, v := range fields {
		args = append(args, k, v)
	}
	return args
}
