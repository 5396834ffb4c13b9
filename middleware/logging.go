package middleware

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/internal/logattr"
	"github.com/koto-dev/watermill-koto/internal/reporting"
)

// Logging logs one line per delivery and one per retry, as Log lines in
// the package doc says, and reports each delivery's outcome to the
// consumer span of telemetry's Middleware outside it. A nil logger means
// slog.Default().
func Logging(logger *slog.Logger) message.HandlerMiddleware {
	if logger == nil {
		logger = slog.Default()
	}
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			start := time.Now()
			ctx := msg.Context()
			// Most lines are ok lines at debug, usually disabled: the
			// attributes are built only for a line that is written.
			base := sync.OnceValue(func() []slog.Attr { return messageAttrs(ctx, msg) })
			rep := &report{
				onRetry: func(n retryNote) {
					reporting.From(ctx).Retried(reporting.Retry{Attempt: n.attempt, Err: n.err, ErrorClass: n.class.String(), Delay: n.delay})
					logRetry(ctx, logger, base(), n)
				},
				onLate: func(text string, err error) {
					b := base()
					logger.LogAttrs(ctx, slog.LevelWarn, text, append(b[:len(b):len(b)], slog.String(logattr.Error, err.Error()))...)
				},
			}
			msg.SetContext(withReport(ctx, rep))
			produced, err := h(msg)
			res := rep.result(err)
			reporting.From(ctx).Report(res.telemetry())
			logDone(ctx, logger, base, res, time.Since(start), err)
			return produced, err
		}
	}
}

// messageAttrs returns the attributes that identify a message.
func messageAttrs(ctx context.Context, msg *message.Message) []slog.Attr {
	id := correlation.FromContext(ctx)
	if id == "" {
		id = correlation.FromMessage(msg)
	}
	pos := positionFrom(ctx, message.SubscribeTopicFromCtx(ctx))
	attrs := []slog.Attr{
		slog.String(logattr.Handler, message.HandlerNameFromCtx(ctx)),
		slog.String(logattr.Topic, pos.Topic),
	}
	if pos.kafka {
		attrs = append(attrs, slog.Int(logattr.Partition, int(pos.Partition)), slog.Int64(logattr.Offset, pos.Offset))
	}
	return append(attrs, slog.String(logattr.MessageUUID, msg.UUID), slog.String(logattr.Correlation, id))
}

func logDone(ctx context.Context, logger *slog.Logger, lazyBase func() []slog.Attr, res result, d time.Duration, err error) {
	level := outcomeLevel(res.outcome)
	if !logger.Enabled(ctx, level) {
		return
	}
	base := lazyBase()
	attrs := append(base[:len(base):len(base)], slog.Duration(logattr.Duration, d), slog.String(logattr.Outcome, string(res.outcome)))
	if res.attempts > 1 {
		attrs = append(attrs, slog.Int(logattr.Attempts, res.attempts))
	}
	attrs = append(attrs, res.attrs...)
	if err != nil {
		attrs = append(attrs, slog.String(logattr.Error, err.Error()))
	}
	logger.LogAttrs(ctx, level, "message handled", attrs...)
}

func logRetry(ctx context.Context, logger *slog.Logger, base []slog.Attr, n retryNote) {
	attrs := append(base[:len(base):len(base)],
		slog.String(logattr.Outcome, string(outcomeRetry)),
		slog.Int(logattr.Attempts, n.attempt),
		slog.String(logattr.Error, n.err.Error()),
		slog.String(logattr.ErrorClass, n.class.String()),
		slog.Duration(logattr.RetryDelay, n.delay),
	)
	logger.LogAttrs(ctx, slog.LevelWarn, "message handling failed, retrying", attrs...)
}

func outcomeLevel(o outcome) slog.Level {
	switch o {
	case outcomeDeadLettered:
		return slog.LevelError
	case outcomeNacked, outcomeRetry, outcomeParked:
		return slog.LevelWarn
	default:
		return slog.LevelDebug
	}
}
