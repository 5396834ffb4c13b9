package koto

import (
	"errors"
	"time"
)

// retryAfter is an error marked by [RetryAfter].
type retryAfter struct {
	err   error
	delay time.Duration
}

func (r *retryAfter) Error() string { return r.err.Error() }
func (r *retryAfter) Unwrap() error { return r.err }

// ErrorType is what OpenTelemetry records as error.type: the type of the
// marked error, as for [Poison] and [Outage].
func (r *retryAfter) ErrorType() string { return typeUnderWrappers(r.err) }

// RetryAfter marks err as a failure that asks to be tried again after
// delay, as HTTP's Retry-After does: a dependency that said "come back in
// ten minutes". Where the dead-letter middleware parks messages
// (middleware.ParkingConfig) it parks the message at once, for delay,
// without retrying it in place; elsewhere it is [ClassRetryable], as it is
// for [ClassOf]. A negative delay counts as zero. RetryAfter(nil, d) is
// nil.
func RetryAfter(err error, delay time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfter{err: err, delay: max(delay, 0)}
}

// RetryDelay returns the delay of the [RetryAfter] mark nearest the top of
// err's chain, and whether there is one above any [Poison] or [Outage]
// mark.
func RetryDelay(err error) (time.Duration, bool) {
	var r *retryAfter
	if !errors.As(err, &r) {
		return 0, false
	}
	if c, ok := markOf(err); ok && c != ClassRetryable {
		return 0, false
	}
	return r.delay, true
}
