package middleware

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is wrapped by every error that rejects a configuration:
// of the constructors ([DeadLetter], [NewIdempotency], [Defaults]), of the
// Validate methods, and of [DeadLetter] when it finds no valid dead-letter
// topic for a message. Test for it with errors.Is; the error's text names
// the field and says what to change.
var ErrInvalidConfig = errors.New("middleware: invalid configuration")

// invalid returns a configuration error: ErrInvalidConfig followed by the
// formatted text.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// PermanentError marks a handler error that no retry can fix: the message
// is dead-lettered at once. Create one with [Permanent]; test for one with
// errors.As.
type PermanentError struct {
	Err error
}

// Permanent marks err as permanent: [DeadLetter] sends the message to the
// dead-letter topic without retrying it. Permanent(nil) is nil.
//
// Wrap with it the error of decoding a message's payload: [Classify] does
// not take a bare JSON error for poison, since it may come from a
// dependency rather than from the message.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// Error returns the text of the wrapped error.
func (e *PermanentError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// TransientError marks an error of the infrastructure, not of the message:
// a database or broker that cannot be reached, a dependency that timed out.
// Such an outage is retried with backoff until it succeeds and is never
// dead-lettered. Create one with [Transient]; test for one with errors.As.
type TransientError struct {
	Err error
}

// Transient marks err as an outage: [DeadLetter] retries the message with
// backoff for as long as it takes, and never dead-letters it.
// Transient(nil) is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &TransientError{Err: err}
}

// Error returns the text of the wrapped error.
func (e *TransientError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *TransientError) Unwrap() error { return e.Err }

// PanicError is the error [DeadLetter] returns for a handler that panicked.
// [Classify] treats it as poison.
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

// ErrMarkPending is returned, as an outage, for a delivery of a key whose
// earlier delivery is still waiting for its ack to be marked, after
// StoreTimeout: the delivery is retried rather than run a second time.
var ErrMarkPending = errors.New("middleware: an earlier delivery of this message is waiting to be marked")

// ErrReturnedMessagesInTx is the permanent error of a handler under
// [TransactionalIdempotency] that returned messages: their publish after the
// commit could fail with nothing to retry it, so the transaction is rolled
// back and the message dead-lettered.
var ErrReturnedMessagesInTx = errors.New("middleware: a handler in the transactional mode returned messages; publish them from the handler instead")
