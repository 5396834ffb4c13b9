package middleware

import (
	"context"
	"log/slog"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/internal/logattr"
)

// NewLogHandler wraps next so that every record logged with a context that
// carries a correlation ID (inside a handler behind [Correlation]:
// logger.InfoContext(msg.Context(), ...)) gets the attribute
// correlation_id, the key of the [Logging] line, unless the record already
// has one.
func NewLogHandler(next slog.Handler) slog.Handler {
	return logHandler{next: next}
}

type logHandler struct {
	next slog.Handler
}

// Enabled reports whether next handles records at level.
func (h logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle adds the correlation ID of ctx to r and passes it on.
func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := correlation.FromContext(ctx); id != "" && !hasAttr(r, logattr.Correlation) {
		r = r.Clone()
		r.AddAttrs(slog.String(logattr.Correlation, id))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs returns a wrapped handler with attrs added.
func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{next: h.next.WithAttrs(attrs)}
}

// WithGroup returns a wrapped handler that nests later attributes in group.
func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{next: h.next.WithGroup(name)}
}

func hasAttr(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == key
		return !found
	})
	return found
}
