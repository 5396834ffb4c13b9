package middleware

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/correlation"
)

// Log attribute keys of the [Logging] middleware, besides [CorrelationAttr].
const (
	HandlerAttr     = "handler"
	TopicAttr       = "topic"
	PartitionAttr   = "partition"
	OffsetAttr      = "offset"
	MessageUUIDAttr = "message_uuid"
	DurationAttr    = "duration"
	OutcomeAttr     = "outcome"
	ErrorAttr       = "error"
	AttemptsAttr    = "attempts"
	ErrorClassAttr  = "error_class"
	RetryDelayAttr  = "retry_delay"
)

// Logging logs one structured line per delivery of a message, when the
// chain inside it returns: handler, topic, partition and offset (when the
// subscriber is Kafka), message_uuid, correlation_id, duration, outcome
// (see [Outcome]), attempts when the handler ran more than once, and error.
// A duplicate adds idempotency_scope and idempotency_key. Levels: debug for
// ok and duplicate, warn for nacked, error for dead-lettered.
//
// Each retry that [DeadLetter] or [Idempotency] schedules is logged too,
// at warn, when it is scheduled: outcome "retry", with the attempt number,
// error, error_class and retry_delay.
//
// The correlation ID comes from the context ([Correlation] must come before
// Logging in the chain; [Defaults] does that) or, failing that, from the
// message's metadata. A nil logger means slog.Default().
//
// The router publishes the messages a handler returns after the chain, so
// after the line: if that publish fails, the line says ok and the router
// nacks the message (and logs the error itself). [Idempotency] marks such a
// message only once the router acks it; a mark that fails then is logged on
// a line of its own, at warn, with the message's attributes and error.
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
				onRetry: func(n retryNote) { logRetry(ctx, logger, base(), n) },
				onLate: func(text string, err error) {
					b := base()
					logger.LogAttrs(ctx, slog.LevelWarn, text, append(b[:len(b):len(b)], slog.String(ErrorAttr, err.Error()))...)
				},
			}
			msg.SetContext(withReport(ctx, rep))
			produced, err := h(msg)
			logDone(ctx, logger, base, rep, time.Since(start), err)
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
		slog.String(HandlerAttr, message.HandlerNameFromCtx(ctx)),
		slog.String(TopicAttr, pos.topic),
	}
	if pos.kafka {
		attrs = append(attrs, slog.Int(PartitionAttr, int(pos.partition)), slog.Int64(OffsetAttr, pos.offset))
	}
	return append(attrs, slog.String(MessageUUIDAttr, msg.UUID), slog.String(CorrelationAttr, id))
}

func logDone(ctx context.Context, logger *slog.Logger, lazyBase func() []slog.Attr, rep *report, d time.Duration, err error) {
	outcome, attempts, extra := rep.snapshot()
	if err != nil {
		outcome = OutcomeNacked
	} else if outcome == "" {
		outcome = OutcomeOK
	}
	level := outcomeLevel(outcome)
	if !logger.Enabled(ctx, level) {
		return
	}
	base := lazyBase()
	attrs := append(base[:len(base):len(base)], slog.Duration(DurationAttr, d), slog.String(OutcomeAttr, string(outcome)))
	if attempts > 1 {
		attrs = append(attrs, slog.Int(AttemptsAttr, attempts))
	}
	attrs = append(attrs, extra...)
	if err != nil {
		attrs = append(attrs, slog.String(ErrorAttr, err.Error()))
	}
	logger.LogAttrs(ctx, level, "message handled", attrs...)
}

func logRetry(ctx context.Context, logger *slog.Logger, base []slog.Attr, n retryNote) {
	attrs := append(base[:len(base):len(base)],
		slog.String(OutcomeAttr, string(OutcomeRetry)),
		slog.Int(AttemptsAttr, n.attempt),
		slog.String(ErrorAttr, n.err.Error()),
		slog.String(ErrorClassAttr, n.class.String()),
		slog.Duration(RetryDelayAttr, n.delay),
	)
	logger.LogAttrs(ctx, slog.LevelWarn, "message handling failed, retrying", attrs...)
}

func outcomeLevel(o Outcome) slog.Level {
	switch o {
	case OutcomeDeadLettered:
		return slog.LevelError
	case OutcomeNacked, OutcomeRetry:
		return slog.LevelWarn
	default:
		return slog.LevelDebug
	}
}
