package middleware

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is wrapped by every error that rejects a configuration:
// of the constructors, of the Validate methods, and of [DeadLetter] when it
// finds no valid dead-letter topic for a message. Test for it with
// errors.Is; the error's text names the field and says what to change.
var ErrInvalidConfig = errors.New("middleware: invalid configuration")

// invalid returns a configuration error: ErrInvalidConfig followed by the
// formatted text.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// PoisonError marks an error of the message itself, which no retry can
// fix ([ClassPoison]). Create one with [Poison]; test for one with
// errors.As.
type PoisonError struct {
	Err error // the error marked poison
}

// Poison marks err as poison: [DeadLetter] sends the message to the
// dead-letter topic at once, without retrying it. Poison(nil) is nil. Wrap
// with it the error of decoding a message's payload (see the package doc).
func Poison(err error) error {
	if err == nil {
		return nil
	}
	return &PoisonError{Err: err}
}

// Error returns the text of the wrapped error.
func (e *PoisonError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PoisonError) Unwrap() error { return e.Err }

// OutageError marks an error of the infrastructure, not of the message
// ([ClassOutage]). Create one with [Outage]; test for one with errors.As.
type OutageError struct {
	Err error // the error marked an outage
}

// Outage marks err as an outage: [DeadLetter] retries the message with
// backoff for as long as it takes and never dead-letters it. Outage(nil)
// is nil.
func Outage(err error) error {
	if err == nil {
		return nil
	}
	return &OutageError{Err: err}
}

// Error returns the text of the wrapped error.
func (e *OutageError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *OutageError) Unwrap() error { return e.Err }

// PanicError is the error [DeadLetter] returns for a handler that panicked.
// It is [ClassPoison].
type PanicError struct {
	// Value is what the handler passed to panic.
	Value any
	// Stack is the stack trace of the panicking goroutine.
	Stack string
}

// Error describes the panic value; the stack is in the Stack field.
func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// Unwrap returns the panic value when it is an error, so errors.Is and
// errors.As see it.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// ErrMarkPending is the outage of a delivery whose key an earlier delivery
// still waits to mark after its ack (see [IdempotentConsumer]).
var ErrMarkPending = errors.New("middleware: an earlier delivery of this message is waiting to be marked")

// ErrReturnedMessagesInTx is the poison of a handler under
// [TransactionalIdempotency] that returned messages with no outbox to
// write them into, or no publish topic for them (see there).
var ErrReturnedMessagesInTx = errors.New("middleware: a handler in the transactional mode returned messages; publish them from the handler instead")

// ErrClosed is the outage of a delivery that reaches an
// [IdempotentConsumer] (or a [Chain]) after its Close: the message is
// nacked, for another instance or a later run to handle.
var ErrClosed = errors.New("middleware: closed")
