package middleware

import (
	"errors"
	"fmt"
)

// PanicError is the error of a handler that panicked, recovered by
// [DeadLetter]; it is poison.
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

// errMarkPending is the outage of a delivery whose key an earlier delivery
// still waits to mark after its ack (see [Idempotency]).
var errMarkPending = errors.New("middleware: an earlier delivery of this message is waiting to be marked")

// ErrReturnedMessagesInTx is the poison of a transactional handler that
// returned messages with no outbox to write them into, or no publish topic
// for them.
var ErrReturnedMessagesInTx = errors.New("middleware: a handler in the transactional mode returned messages; publish them from the handler instead")

// ErrClosed is the outage of a delivery that reaches a [Chain] after its
// Close: the message is nacked, for another instance to handle.
var ErrClosed = errors.New("middleware: closed")
