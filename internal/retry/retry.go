// Package retry is the one retry loop of the project: call, and after a
// failure ask the caller whether to wait and call again. Every loop waits
// by a koto.Backoff's Delay, or a fixed pause.
package retry

import (
	"context"
	"errors"
	"time"
)

// Failure is a failed call that [Do] may retry.
type Failure struct {
	Err   error         // the call's error
	Retry int           // the retry that would follow, counting from 1
	Delay time.Duration // the wait before it
}

// Do calls op until it returns nil, and then returns nil. After each
// failure it calls next with the error, the number of the retry that would
// follow and the wait before it (delay(retry-1)): a non-nil result ends Do
// with that error; nil waits and calls op again. When ctx ends during a
// wait, Do returns the last error, passed through interrupted unless that
// is nil.
//
// An error op wraps with [AfterProgress] starts the count again: the
// operation got somewhere before it failed, so the wait is delay(0).
func Do(ctx context.Context, delay func(retry int) time.Duration, op func() error,
	next func(Failure) error, interrupted func(error) error) error {
	for n := 0; ; n++ {
		err := op()
		if err == nil {
			return nil
		}
		var p progress
		if errors.As(err, &p) {
			n, err = 0, p.err
		}
		f := Failure{Err: err, Retry: n + 1, Delay: delay(n)}
		if stop := next(f); stop != nil {
			return stop
		}
		if Sleep(ctx, f.Delay) != nil {
			if interrupted != nil {
				return interrupted(err)
			}
			return err
		}
	}
}

// Sleep waits for d or until ctx ends, and then returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AfterProgress marks err as the failure of an operation that made progress
// first, for [Do] to count its retries from the start again.
func AfterProgress(err error) error {
	if err == nil {
		return nil
	}
	return progress{err}
}

type progress struct{ err error }

func (p progress) Error() string { return p.err.Error() }
func (p progress) Unwrap() error { return p.err }
