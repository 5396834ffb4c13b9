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

	koto "github.com/koto-dev/watermill-koto"

	wcqrs "github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/ThreeDotsLabs/watermill/components/requestreply"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/logattr"
	"github.com/koto-dev/watermill-koto/internal/retry"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// NewCommandConsumer returns a Consumer of commands of type C that produce
// no result: [NewCommandConsumerWithResult] with an empty result, for which
// a requester waits with Request[struct{}].
func NewCommandConsumer[C any](handle func(ctx context.Context, cmd *C) error, opts ...ConsumerOption) Consumer {
	return NewCommandConsumerWithResult(func(ctx context.Context, cmd *C) (struct{}, error) {
		return struct{}{}, handle(ctx, cmd)
	}, opts...)
}

// NewCommandConsumerWithResult returns a Consumer of commands of type C
// whose handler's result of type R, or error, is the reply to a [Request].
// Registered on a Service, it listens on topics.Command(service, type
// name) unless [Topic] says otherwise. The package doc (Consumers) says
// what becomes of a command, its reply and its errors.
func NewCommandConsumerWithResult[C, R any](handle func(ctx context.Context, cmd *C) (R, error), opts ...ConsumerOption) Consumer {
	s := newSpec[C](commandKind, opts)
	s.handle = func(msg *message.Message, env *handlerEnv) error {
		if skip, err := s.checkType(msg, env); skip || err != nil {
			return err
		}
		c := newCommandCall(msg, env, s.typeName)
		sp, err := c.savepoint()
		if err != nil {
			return err
		}
		result := runCommand(c, handle)
		if err := c.endSavepoint(sp); err != nil {
			return err
		}
		return c.finish(result)
	}
	return s
}

// savepoint opens a savepoint in the transaction of a transactional
// consumer whose sender waits for a reply, and returns it (nil otherwise):
// such a command is acked whatever its handler returns, since the
// requester gets the outcome, so a failed handler's writes are undone by
// rolling back to the savepoint while the claim commits.
func (c *commandCall) savepoint() (pgx.Tx, error) {
	if !c.env.transactional || !c.waiting() {
		return nil, nil
	}
	tx, ok := postgres.TxFromContext(c.ctx)
	if !ok {
		return nil, nil
	}
	sp, err := tx.Begin(c.ctx)
	if err != nil {
		return nil, koto.Outage(fmt.Errorf("cqrs: savepoint for %s: %w", c.typeName, err))
	}
	return sp, nil
}

// endSavepoint releases sp after a handler that succeeded, and rolls back
// to it after one that returned an error (or a payload that did not
// decode). After a panic it does nothing: the whole transaction rolls
// back.
func (c *commandCall) endSavepoint(sp pgx.Tx) error {
	if sp == nil || c.panic != nil {
		return nil
	}
	end := sp.Commit
	if c.err != nil {
		end = sp.Rollback
	}
	if err := end(c.ctx); err != nil {
		return koto.Outage(fmt.Errorf("cqrs: ending the savepoint of %s: %w", c.typeName, err))
	}
	return nil
}

// Results of a command handler, the "result" of its log line (the
// "outcome" of the middleware's line says what became of the message).
const (
	resultOK          = "ok"
	resultError       = "error"
	resultPanic       = "panic"
	resultBadRequest  = "bad-request"
	resultReplyFailed = "reply-failed"
)

// commandCall is one delivery of a command to its handler.
type commandCall struct {
	ctx      context.Context
	msg      *message.Message
	env      *handlerEnv
	typeName string
	replyTo  string // with op, set when the sender waits for a reply
	op       string
	start    time.Time

	result string
	err    error                  // the handler's, or the decoding error
	panic  *middleware.PanicError // recovered when the sender waits
}

func newCommandCall(msg *message.Message, env *handlerEnv, typeName string) *commandCall {
	return &commandCall{
		ctx:      wcqrs.CtxWithOriginalMessage(msg.Context(), msg),
		msg:      msg,
		env:      env,
		typeName: typeName,
		replyTo:  msg.Metadata.Get(replyToKey),
		op:       msg.Metadata.Get(operationIDKey),
		start:    time.Now(),
	}
}

// waiting reports whether the sender waits for a reply.
func (c *commandCall) waiting() bool { return c.replyTo != "" && c.op != "" }

// runCommand decodes the command and calls handle. When the sender waits,
// a panic is recovered so that it can be replied; otherwise it is left to
// the dead-letter middleware.
func runCommand[C, R any](c *commandCall, handle func(context.Context, *C) (R, error)) (result R) {
	cmd := new(C)
	if err := json.Unmarshal(c.msg.Payload, cmd); err != nil {
		c.result = resultBadRequest
		c.err = &HandlerError{Kind: KindBadRequest, Message: fmt.Sprintf("decoding %s: %v", c.typeName, err)}
		return result
	}
	if c.waiting() {
		defer c.recoverPanic()
	}
	result, c.err = handle(c.ctx, cmd)
	c.result = resultOK
	if c.err != nil {
		c.result = resultError
	}
	return result
}

// recoverPanic, deferred, turns a panic of the handler into a reply.
func (c *commandCall) recoverPanic() {
	if v := recover(); v != nil {
		c.result = resultPanic
		c.panic = &middleware.PanicError{Value: v, Stack: string(debug.Stack())}
		c.err = &HandlerError{Kind: KindInternal, Message: fmt.Sprintf("handler panicked: %v", v)}
	}
}

// finish replies when the sender waits, logs the command, and returns
// what the dead-letter middleware is to do with it.
func (c *commandCall) finish(result any) error {
	if c.waiting() {
		// Reply first: the requester waits, the log line does not.
		if err := c.reply(result); err != nil {
			c.log(resultReplyFailed, errors.Join(c.err, err))
			return err
		}
	}
	c.log(c.result, c.err)
	switch {
	case c.panic != nil:
		return c.panic
	case c.result == resultBadRequest:
		return koto.Poison(c.err)
	case c.waiting():
		return nil // the requester has the outcome
	}
	return c.err
}

// replyTypeSuffix makes the type name of a reply from its command's, so
// that a reply has one, as a CloudEvent needs: "reserve-stock-reply".
const replyTypeSuffix = "-reply"

// reply publishes the reply to a request in the format of Watermill's
// requestreply.BackendPubsubJSONMarshaler (the result as JSON, the error in
// its metadata keys), plus the operation ID, the error kind and the
// correlation ID.
func (c *commandCall) reply(result any) error {
	if err := topics.Validate(c.replyTo); err != nil {
		return koto.Poison(fmt.Errorf("cqrs: request %s names an invalid reply topic: %w", c.op, err))
	}
	payload, err := json.Marshal(result)
	if err != nil {
		return koto.Poison(fmt.Errorf("cqrs: encoding the reply to %s: %w", c.op, err))
	}
	reply := message.NewMessage(newMessageID(), payload)
	reply.SetContext(c.ctx) // a publisher such as broker.Publisher stops waiting when the command's context ends; the reply's producer span is a child of the command's consumer span
	reply.Metadata = make(message.Metadata, 6)
	reply.Metadata[operationIDKey] = c.op
	reply.Metadata[koto.TypeNameMetadataKey] = c.typeName + replyTypeSuffix
	reply.Metadata[requestreply.HasErrorMetadataKey] = "0"
	if c.err != nil {
		he := replyError(c.err)
		reply.Metadata[requestreply.HasErrorMetadataKey] = "1"
		reply.Metadata[requestreply.ErrorMetadataKey] = he.Message
		reply.Metadata[errorKindKey] = he.Kind
	}
	if id := cmp.Or(correlation.FromContext(c.ctx), correlation.FromMessage(c.msg)); id != "" {
		reply.Metadata[correlation.MetadataKey] = id
	}
	return publishReply(c.ctx, c.env, c.replyTo, c.op, reply)
}

// publishReply publishes reply to topic. The handler has already run, so a
// publish that fails with an outage (koto.ClassOf) is retried here,
// in place, with env.backoff, until it succeeds or ctx ends: returned to the
// dead-letter middleware, it would run the handler again. An outage that
// outlives ctx stays one: the command is nacked. Any other publish error is
// poison: the broker refuses this reply for good (too large, no such
// topic), so the command is dead-lettered rather than block its partition,
// without running the handler again.
func publishReply(ctx context.Context, env *handlerEnv, topic, op string, reply *message.Message) error {
	return retry.Do(ctx, env.backoff.Delay, func() error {
		if err := env.pub.Publish(topic, reply); err != nil {
			return fmt.Errorf("cqrs: publishing the reply to %s on %s: %w", op, topic, err)
		}
		return nil
	}, func(f retry.Failure) error {
		if koto.ClassOf(f.Err) != koto.ClassOutage {
			return koto.Poison(f.Err)
		}
		env.logger.WarnContext(ctx, "reply not published; retrying",
			logattr.Handler, env.handlerName, logattr.OperationID, op, logattr.Attempts, f.Retry,
			logattr.RetryDelay, f.Delay, logattr.Error, f.Err.Error())
		return nil
	}, koto.Outage)
}

// log logs the command once handled: at warn when it failed, at info
// when it succeeded or answered its requester with a HandlerError of a kind
// of its own, a result the caller expects.
func (c *commandCall) log(result string, err error) {
	level := slog.LevelInfo
	kind := errorKind(err)
	if err != nil && (result != resultError || !c.waiting() || kind == KindInternal) {
		level = slog.LevelWarn
	}
	if !c.env.logger.Enabled(c.ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String(logattr.Type, c.typeName),
		slog.String(logattr.MessageUUID, c.msg.UUID),
		slog.String(logattr.Correlation, correlation.FromContext(c.ctx)),
		slog.Duration(logattr.Duration, time.Since(c.start)),
		slog.String(logattr.Result, result),
	}
	if c.op != "" {
		attrs = append(attrs, slog.String(logattr.OperationID, c.op))
	}
	if err != nil {
		attrs = append(attrs, slog.String(logattr.ErrorKind, kind), slog.String(logattr.Error, err.Error()))
	}
	c.env.logger.LogAttrs(c.ctx, level, "command handled", attrs...)
}
