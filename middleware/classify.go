package middleware

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"

	wmmiddleware "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/koto-dev/watermill-koto/idempotency"
)

// ErrorClass is what [DeadLetter] does with a handler error.
type ErrorClass int

const (
	// Retryable errors are retried with backoff up to the configured
	// attempts and elapsed time, then dead-lettered.
	Retryable ErrorClass = iota
	// Poison errors belong to the message: it is dead-lettered at once.
	Poison
	// Outage errors belong to the infrastructure: the message is retried
	// with backoff until it succeeds and is never dead-lettered.
	Outage
)

// String returns "retryable", "poison" or "outage".
func (c ErrorClass) String() string {
	switch c {
	case Poison:
		return "poison"
	case Outage:
		return "outage"
	default:
		return "retryable"
	}
}

// Classify is the default classification of handler errors.
//
// An explicit mark decides first: the mark nearest the top of the error
// chain wins, so Transient(Permanent(err)) is an outage. [PermanentError]
// and [PanicError] are Poison, [TransientError] is an Outage.
//
// Without a mark, these are an Outage anywhere in the chain:
// [idempotency.ErrStoreUnavailable], context.DeadlineExceeded (a dependency
// timed out), any net.Error, a pgconn.ConnectError, a pgx error that pgconn
// reports safe to retry or a timeout, and a PostgreSQL error of SQLSTATE
// class 08 (connection), 53 (insufficient resources), 57P (shutdown,
// cannot connect now) or 58 (system error).
//
// Then these are Poison: a payload that does not decode as JSON
// (*json.SyntaxError, *json.UnmarshalTypeError) and a panic recovered by
// Watermill's Recoverer. Everything else is Retryable.
func Classify(err error) ErrorClass {
	if class, ok := markedClass(err); ok {
		return class
	}
	if isOutage(err) {
		return Outage
	}
	if isPoison(err) {
		return Poison
	}
	return Retryable
}

// markedClass walks the error tree top down and returns the class of the
// first explicit mark.
func markedClass(err error) (ErrorClass, bool) {
	switch e := err.(type) {
	case nil:
		return Retryable, false
	case *PermanentError, *PanicError:
		return Poison, true
	case *TransientError:
		return Outage, true
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if class, ok := markedClass(inner); ok {
				return class, true
			}
		}
		return Retryable, false
	case interface{ Unwrap() error }:
		return markedClass(e.Unwrap())
	}
	return Retryable, false
}

func isOutage(err error) bool {
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, idempotency.ErrStoreUnavailable),
		errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr),
		errors.As(err, &connectErr),
		pgconn.SafeToRetry(err),
		pgconn.Timeout(err):
		return true
	case errors.As(err, &pgErr):
		return outageSQLState(pgErr.Code)
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

func isPoison(err error) bool {
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var recovered wmmiddleware.RecoveredPanicError
	return errors.As(err, &syntaxErr) ||
		errors.As(err, &typeErr) ||
		errors.As(err, &recovered)
}
