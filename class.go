package koto

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"

	wmmiddleware "github.com/ThreeDotsLabs/watermill/message/router/middleware"
)

// Class is what the dead-letter middleware does with an error; the
// package doc describes each.
type Class int

const (
	// ClassRetryable is retried a bounded number of times, then
	// dead-lettered.
	ClassRetryable Class = iota
	// ClassPoison is dead-lettered at once.
	ClassPoison
	// ClassOutage is retried until it succeeds and never dead-lettered.
	ClassOutage
)

// String returns "retryable", "poison" or "outage".
func (c Class) String() string {
	switch c {
	case ClassPoison:
		return "poison"
	case ClassOutage:
		return "outage"
	default:
		return "retryable"
	}
}

// mark is an error marked with a class by [Poison] or [Outage].
type mark struct {
	err   error
	class Class
}

func (m *mark) Error() string { return m.err.Error() }
func (m *mark) Unwrap() error { return m.err }

// ErrorType is what OpenTelemetry records as error.type: the type of the
// marked error, under the wrappers of fmt.Errorf, not the mark's.
func (m *mark) ErrorType() string { return typeUnderWrappers(m.err) }

// typeUnderWrappers returns the Go type of err under the wrappers of
// fmt.Errorf.
func typeUnderWrappers(err error) string {
	for {
		t := reflect.TypeOf(err).String()
		if t != "*fmt.wrapError" && t != "*fmt.wrapErrors" {
			return t
		}
		inner := errors.Unwrap(err)
		if inner == nil {
			if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 0 {
				inner = j.Unwrap()[0]
			}
		}
		if inner == nil {
			return t
		}
		err = inner
	}
}

// Poison marks err as [ClassPoison]: the message is dead-lettered at once.
// Poison(nil) is nil.
func Poison(err error) error { return marked(err, ClassPoison) }

// Outage marks err as [ClassOutage]: the message is retried for as long as
// it takes and never dead-lettered. Outage(nil) is nil.
func Outage(err error) error { return marked(err, ClassOutage) }

func marked(err error, c Class) error {
	if err == nil {
		return nil
	}
	return &mark{err: err, class: c}
}

// ClassOf returns the class of err. The mark nearest the top of the error
// chain decides, so Outage(Poison(err)) is an outage, and a [RetryAfter]
// mark is retryable. Without a mark these
// are [ClassOutage] anywhere in the chain: context.DeadlineExceeded (a
// dependency timed out), any net.Error, an error whose SafeToRetry method
// reports true (pgx's for a statement that never reached the server), and
// an error whose SQLState method reports a PostgreSQL class 08
// (connection), 53 (insufficient resources), 57P (shutdown) or 58 (system
// error). A panic recovered by Watermill's Recoverer is [ClassPoison].
// Everything else is [ClassRetryable].
func ClassOf(err error) Class {
	if c, ok := markOf(err); ok {
		return c
	}
	if isOutage(err) {
		return ClassOutage
	}
	var recovered wmmiddleware.RecoveredPanicError
	if errors.As(err, &recovered) {
		return ClassPoison
	}
	return ClassRetryable
}

// markOf walks the error tree top down and returns the class of the first
// mark.
func markOf(err error) (Class, bool) {
	switch e := err.(type) {
	case nil:
		return ClassRetryable, false
	case *mark:
		return e.class, true
	case *retryAfter:
		return ClassRetryable, true
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if c, ok := markOf(inner); ok {
				return c, true
			}
		}
		return ClassRetryable, false
	case interface{ Unwrap() error }:
		return markOf(e.Unwrap())
	}
	return ClassRetryable, false
}

func isOutage(err error) bool {
	var netErr net.Error
	var retry interface{ SafeToRetry() bool }
	var state interface{ SQLState() string }
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr):
		return true
	case errors.As(err, &retry) && retry.SafeToRetry():
		return true
	case errors.As(err, &state):
		return outageSQLState(state.SQLState())
	}
	return false
}

// outageSQLState reports whether a PostgreSQL error code says the server,
// not the statement, is the problem.
func outageSQLState(code string) bool {
	for _, prefix := range []string{"08", "53", "57P", "58"} {
		if strings.HasPrefix(code, prefix) {
			return true
		}
	}
	return false
}
