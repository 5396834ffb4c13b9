package cqrs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	wcqrs "github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/ThreeDotsLabs/watermill/components/requestreply"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// Consumer is a typed message handler that a Service registers on a router.
// Build one with NewEventConsumer, NewCommandConsumer or
// NewCommandConsumerWithResult.
type Consumer interface {
	// TypeName is the name of the message type the consumer handles,
	// topics.TypeName of it.
	TypeName() string

	spec() *consumerSpec
}

// ConsumerOption changes how a Service registers a Consumer.
type ConsumerOption func(*consumerOptions)

type consumerOptions struct {
	from       string
	topic      string
	group      string
	idempotent *bool
	skipOthers bool
}

// From names the service that publishes the events an event consumer
// handles: the consumer subscribes to topics.Event(service, type name),
// "orders.order-placed" for From("orders"). An event consumer needs From or
// Topic. Command consumers listen on their own service's topic and reject
// From.
func From(service string) ConsumerOption {
	return func(o *consumerOptions) { o.from = service }
}

// Topic subscribes the consumer to an explicit topic instead of the
// conventional one, the consuming side of a Route.
func Topic(topic string) ConsumerOption {
	return func(o *consumerOptions) { o.topic = topic }
}

// ConsumerGroup replaces the consumer group (and handler name) of a
// consumer, topics.ConsumerGroup(service, type name) by default. Two
// consumers of one type in one service need different groups.
func ConsumerGroup(group string) ConsumerOption {
	return func(o *consumerOptions) { o.group = group }
}

// Idempotent turns deduplication by message ID on or off. Event consumers
// are idempotent by default, command consumers are not. A request that an
// idempotent command consumer skips as a duplicate gets no reply: its
// sender times out.
func Idempotent(on bool) ConsumerOption {
	return func(o *consumerOptions) { o.idempotent = &on }
}

// SkipOtherTypes makes the consumer ack, with a debug log line, the
// messages whose type name (TypeNameMetadataKey) is another type's: for a
// topic that carries several types, each read by its own consumer.
// Without it such a message is poison, dead-lettered at once with an error
// that wraps ErrUnexpectedType and names both types. A message without a
// type name, from a producer that does not set one, is handled either way.
func SkipOtherTypes() ConsumerOption {
	return func(o *consumerOptions) { o.skipOthers = true }
}

type consumerKind int

const (
	eventKind consumerKind = iota
	commandKind
)

func (k consumerKind) String() string {
	if k == commandKind {
		return "command"
	}
	return "event"
}

// consumerSpec is what every Consumer is.
type consumerSpec struct {
	kind     consumerKind
	typeName string
	goType   string
	opts     consumerOptions
	// handle handles one message; env is the registration's.
	handle func(msg *message.Message, env *handlerEnv) error
}

func (s *consumerSpec) TypeName() string    { return s.typeName }
func (s *consumerSpec) spec() *consumerSpec { return s }

// handlerEnv is what a registered consumer needs from its Service.
type handlerEnv struct {
	handlerName string
	pub         message.Publisher  // replies
	backoff     middleware.Backoff // spaces the retries of a failed reply
	logger      *slog.Logger
}

func newSpec[T any](kind consumerKind, opts []ConsumerOption) *consumerSpec {
	s := &consumerSpec{kind: kind, typeName: topics.TypeName(new(T)), goType: fmt.Sprintf("%T", new(T))[1:]}
	for _, opt := range opts {
		opt(&s.opts)
	}
	return s
}

// NewEventConsumer returns a Consumer of events of type T, Koto's
// IntegrationEventConsumerBase<T>. handle gets each event decoded from JSON,
// with the correlation ID of its message in ctx (correlation.FromContext)
// and the message itself in cqrs.OriginalMessageFromCtx of Watermill.
//
// Registered on a Service, the consumer is idempotent by default (a message
// ID handled once is acked without calling handle again), retries a failing
// handle with backoff and then dead-letters the message, dead-letters at
// once a payload that does not decode, a message of another type (see
// SkipOtherTypes) or an error wrapped with middleware.Permanent, and logs
// each message. Give the producing service
// with From, or the topic with Topic.
func NewEventConsumer[T any](handle func(ctx context.Context, ev *T) error, opts ...ConsumerOption) Consumer {
	s := newSpec[T](eventKind, opts)
	s.handle = func(msg *message.Message, env *handlerEnv) error {
		if skip, err := s.checkType(msg, env); skip || err != nil {
			return err
		}
		ev := new(T)
		if err := json.Unmarshal(msg.Payload, ev); err != nil {
			return middleware.Permanent(fmt.Errorf("cqrs: decoding %s: %w", s.typeName, err))
		}
		return handle(wcqrs.CtxWithOriginalMessage(msg.Context(), msg), ev)
	}
	return s
}

// NewCommandConsumer returns a Consumer of commands of type C that produce
// no result, Koto's IntegrationCommandConsumerBase<C>. It is
// NewCommandConsumerWithResult with an empty result: a requester waits
// with Request[struct{}].
func NewCommandConsumer[C any](handle func(ctx context.Context, cmd *C) error, opts ...ConsumerOption) Consumer {
	return NewCommandConsumerWithResult(func(ctx context.Context, cmd *C) (struct{}, error) {
		return struct{}{}, handle(ctx, cmd)
	}, opts...)
}

// NewCommandConsumerWithResult returns a Consumer of commands of type C
// whose handler returns a result of type R to the requester.
//
// Registered on a Service, the consumer listens on topics.Event(service,
// type name) unless Topic says otherwise, and logs each command with its
// type, message ID, correlation ID, duration and outcome.
//
// A command sent with Request gets a reply: the result as JSON, or the
// handler's error (message and kind, see HandlerError). The command is then
// acked either way: the requester has the outcome and decides what to do.
// The handler runs once per delivery: a reply that fails to publish is
// retried on its own, with ServiceConfig.DeadLetter.Backoff, until it is
// published or the message's context ends; then the command is nacked as an
// outage (middleware.Transient) and redelivered, never dead-lettered.
// A panic is replied as a KindInternal error and the command dead-lettered;
// a payload that does not decode is replied as KindBadRequest and
// dead-lettered. A command of another type is dead-lettered (or skipped,
// see SkipOtherTypes) without a reply: its own consumer may answer it. A command sent with Send is fire-and-forget: a handler
// error is retried with backoff and then dead-lettered, like an event's.
func NewCommandConsumerWithResult[C, R any](handle func(ctx context.Context, cmd *C) (R, error), opts ...ConsumerOption) Consumer {
	s := newSpec[C](commandKind, opts)
	s.handle = func(msg *message.Message, env *handlerEnv) error {
		if skip, err := s.checkType(msg, env); skip || err != nil {
			return err
		}
		start := time.Now()
		ctx := wcqrs.CtxWithOriginalMessage(msg.Context(), msg)
		replyTo, op := msg.Metadata.Get(ReplyToMetadataKey), msg.Metadata.Get(OperationIDMetadataKey)
		waiting := replyTo != "" && op != ""
		var (
			result     R
			err        error
			panicV     any
			stack      []byte
			badRequest bool
		)
		cmd := new(C)
		if decodeErr := json.Unmarshal(msg.Payload, cmd); decodeErr != nil {
			badRequest = true
			err = &HandlerError{Kind: KindBadRequest, Message: fmt.Sprintf("decoding %s: %v", s.typeName, decodeErr)}
		} else {
			result, err, panicV, stack = callHandler(ctx, handle, cmd, waiting)
		}
		outcome := outcomeOf(err, panicV, badRequest)
		if !waiting {
			logCommand(ctx, env.logger, s.typeName, msg, op, time.Since(start), outcome, err)
			if outcome == "bad-request" {
				return middleware.Permanent(err)
			}
			return err
		}
		// Reply first: the requester waits, the log line does not.
		if replyErr := sendReply(ctx, env, replyTo, op, msg, result, err); replyErr != nil {
			logCommand(ctx, env.logger, s.typeName, msg, op, time.Since(start), "reply-failed", errors.Join(err, replyErr))
			return replyErr
		}
		logCommand(ctx, env.logger, s.typeName, msg, op, time.Since(start), outcome, err)
		switch outcome {
		case "panic":
			return &middleware.PanicError{Value: panicV, Stack: string(stack)}
		case "bad-request":
			return middleware.Permanent(err)
		}
		return nil
	}
	return s
}

// callHandler calls handle. When the sender waits for a reply, a panic is
// recovered so that it can be replied; otherwise it is left to the
// dead-letter middleware.
func callHandler[C, R any](ctx context.Context, handle func(context.Context, *C) (R, error), cmd *C, recoverPanic bool) (result R, err error, panicV any, stack []byte) {
	if recoverPanic {
		defer func() {
			if v := recover(); v != nil {
				panicV, stack = v, debug.Stack()
				err = &HandlerError{Kind: KindInternal, Message: fmt.Sprintf("handler panicked: %v", v)}
			}
		}()
	}
	result, err = handle(ctx, cmd)
	return result, err, nil, nil
}

// outcomeOf names what became of a command, for its log line.
func outcomeOf(err error, panicV any, badRequest bool) string {
	switch {
	case panicV != nil:
		return "panic"
	case badRequest:
		return "bad-request"
	case err == nil:
		return "ok"
	default:
		return "error"
	}
}

// sendReply publishes the reply to a request in the format of Watermill's
// requestreply.BackendPubsubJSONMarshaler (the result as JSON, the error
// in its metadata keys), plus the operation ID, the error kind and the
// correlation ID.
func sendReply[R any](ctx context.Context, env *handlerEnv, replyTo, op string, cmd *message.Message, result R, handleErr error) error {
	if err := topics.Validate(replyTo); err != nil {
		return middleware.Permanent(fmt.Errorf("cqrs: request %s names an invalid reply topic: %w", op, err))
	}
	payload, err := json.Marshal(result)
	if err != nil {
		return middleware.Permanent(fmt.Errorf("cqrs: encoding the reply to %s: %w", op, err))
	}
	reply := message.NewMessage(newMessageID(), payload)
	reply.Metadata = make(message.Metadata, 6)
	reply.Metadata[OperationIDMetadataKey] = op
	if handleErr != nil {
		he := replyError(handleErr)
		reply.Metadata[requestreply.HasErrorMetadataKey] = "1"
		reply.Metadata[requestreply.ErrorMetadataKey] = he.Message
		reply.Metadata[ErrorKindMetadataKey] = he.Kind
	} else {
		reply.Metadata[requestreply.HasErrorMetadataKey] = "0"
	}
	if id := correlation.FromContext(ctx); id != "" {
		reply.Metadata[correlation.MetadataKey] = id
	} else if id := correlation.FromMessage(cmd); id != "" {
		reply.Metadata[correlation.MetadataKey] = id
	}
	return publishReply(ctx, env, replyTo, op, reply)
}

// publishReply publishes reply to topic. The handler has already run, so a
// failed publish is retried here, in place, with env.backoff, until it
// succeeds or ctx ends: returned to the dead-letter middleware, it would run
// the handler again. An error that outlives ctx is marked
// middleware.Transient, an outage: the command is nacked, not
// dead-lettered.
func publishReply(ctx context.Context, env *handlerEnv, topic, op string, reply *message.Message) error {
	delay := cmp.Or(env.backoff.InitialInterval, 100*time.Millisecond) // middleware.Backoff's defaults
	maxDelay, factor := cmp.Or(env.backoff.MaxInterval, 10*time.Second), cmp.Or(env.backoff.Multiplier, 2)
	for attempt := 1; ; attempt++ {
		err := env.pub.Publish(topic, reply)
		if err == nil {
			return nil
		}
		err = fmt.Errorf("cqrs: publishing the reply to %s on %s: %w", op, topic, err)
		env.logger.WarnContext(ctx, "reply not published; retrying",
			middleware.HandlerAttr, env.handlerName, "operation_id", op, middleware.AttemptsAttr, attempt,
			middleware.RetryDelayAttr, delay, middleware.ErrorAttr, err.Error())
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return middleware.Transient(err)
		}
		delay = min(time.Duration(float64(delay)*factor), maxDelay)
	}
}

// checkType accepts msg when its type name metadata is the consumer's or
// absent (a producer that does not set it). A message of another type is
// poison, or, with SkipOtherTypes, skipped: checkType logs it and reports
// skip.
func (s *consumerSpec) checkType(msg *message.Message, env *handlerEnv) (skip bool, err error) {
	name := msg.Metadata.Get(TypeNameMetadataKey)
	switch {
	case name == "" || name == s.typeName:
		return false, nil
	case !s.opts.skipOthers:
		return false, middleware.Permanent(fmt.Errorf("%w: got %q, want %q; add cqrs.SkipOtherTypes() to the consumer if its topic carries other types",
			ErrUnexpectedType, name, s.typeName))
	}
	env.logger.DebugContext(msg.Context(), "skipping a message of another type",
		middleware.HandlerAttr, env.handlerName, middleware.MessageUUIDAttr, msg.UUID,
		"type", name, "want_type", s.typeName)
	return true, nil
}

// logCommand logs one handled command.
func logCommand(ctx context.Context, logger *slog.Logger, typeName string, msg *message.Message, op string, d time.Duration, outcome string, err error) {
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
	}
	if !logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("type", typeName),
		slog.String(middleware.MessageUUIDAttr, msg.UUID),
		slog.String(middleware.CorrelationAttr, correlation.FromContext(ctx)),
		slog.Duration(middleware.DurationAttr, d),
		slog.String(middleware.OutcomeAttr, outcome),
	}
	if op != "" {
		attrs = append(attrs, slog.String("operation_id", op))
	}
	if err != nil {
		attrs = append(attrs, slog.String(middleware.ErrorAttr, err.Error()))
	}
	logger.LogAttrs(ctx, level, "command handled", attrs...)
}
