package cqrs

import (
	"errors"

	koto "github.com/koto-dev/watermill-koto"
)

var (
	// ErrTimeout is matched by the error of a Request, Send or Publish that
	// ran out of time: its configured Timeout passed, or the deadline of its
	// context. The error also matches context.DeadlineExceeded and says what
	// did not happen in time (see the package documentation).
	ErrTimeout = errors.New("cqrs: timed out")

	// ErrNoRoute is returned for a command whose type has no route in
	// CommandDispatcherConfig.Routes.
	ErrNoRoute = errors.New("cqrs: no route for message type")

	// ErrInvalidRoute is wrapped by the error for a route, reply topic,
	// consumer topic or consumer group that gives no valid Kafka topic
	// name, and for an event whose type name gives none; the error names
	// it and, for a name that breaks Kafka's rules, also wraps
	// topics.ErrInvalid. When it comes from a configuration, the error
	// also wraps koto.ErrInvalidConfig.
	ErrInvalidRoute = errors.New("cqrs: invalid route")

	// ErrNotStarted is returned by Request on a dispatcher whose Start has
	// not run, and wrapped when the Start that a Request waited for failed.
	// It is marked koto.Outage, like ErrClosed: a handler whose Request
	// comes before Start is retried until it succeeds.
	ErrNotStarted = koto.Outage(errors.New("cqrs: command dispatcher not started"))

	// ErrUnexpectedType is wrapped by the error that dead-letters a
	// message whose type name is not its consumer's (see SkipOtherTypes).
	ErrUnexpectedType = errors.New("cqrs: message of an unexpected type")

	// errAlreadyStarted is returned by the Start of a dispatcher that
	// Start already started.
	errAlreadyStarted = errors.New("cqrs: command dispatcher already started")

	// ErrClosed is returned by a dispatcher or service after Close, and
	// wrapped by the error of a call that Close ended. It is marked
	// koto.Outage: a handler whose Send or Request fails because its
	// service is stopping is nacked and redelivered, never dead-lettered.
	ErrClosed = koto.Outage(errors.New("cqrs: closed"))
)

// KindInternal is the kind of a HandlerError for a handler error that
// carries no *HandlerError of its own.
const KindInternal = "internal"

// KindBadRequest is the kind of a HandlerError for a request whose payload
// the handling service could not decode.
const KindBadRequest = "bad-request"

// HandlerError is a command handler's error as the requester sees it: the
// handler's message and a kind that the caller can test.
//
// A handler chooses the kind by returning (or wrapping) a *HandlerError; any
// other error reaches the caller with Kind KindInternal. errors.Is matches
// two HandlerErrors of the same Kind, so a kind works as a sentinel on both
// sides:
//
//	var ErrOutOfStock = &cqrs.HandlerError{Kind: "out-of-stock", Message: "out of stock"}
//
//	// handler
//	return fmt.Errorf("item %s: %w", id, ErrOutOfStock)
//
//	// caller
//	_, err := cqrs.Request[Reserved](ctx, dispatcher, Reserve{ID: id})
//	if errors.Is(err, ErrOutOfStock) { … }
type HandlerError struct {
	// Kind is a short machine-readable category, such as "not-found".
	Kind string
	// Message is the text of the handler's error.
	Message string
}

// Error returns the message, or the kind when the message is empty.
func (e *HandlerError) Error() string {
	if e.Message == "" {
		return e.Kind
	}
	return e.Message
}

// Is reports whether target is a *HandlerError of the same kind.
func (e *HandlerError) Is(target error) bool {
	t, ok := target.(*HandlerError)
	return ok && t.Kind == e.Kind
}

// replyError turns a handler's error into what travels in the reply.
func replyError(err error) *HandlerError {
	return &HandlerError{Kind: errorKind(err), Message: err.Error()}
}

// errorKind returns the kind of the HandlerError in err, KindInternal when
// it has none, or "" for nil.
func errorKind(err error) string {
	var he *HandlerError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &he) && he.Kind != "":
		return he.Kind
	}
	return KindInternal
}
