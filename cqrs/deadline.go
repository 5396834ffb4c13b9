package cqrs

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// callContext bounds a call's ctx by timeout, whichever ends first, and,
// unless closed is nil, by closed: when closed ends, the call's context is
// cancelled with ErrClosed as its cause. The messages of the call carry the
// context, which a publisher such as broker.Publisher honours. budget is
// how long the call may take.
func callContext(ctx context.Context, timeout time.Duration, closed context.Context) (_ context.Context, budget time.Duration, cancel context.CancelFunc) {
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	deadline, _ := ctx.Deadline()
	budget = time.Until(deadline)
	if closed == nil {
		return ctx, budget, cancelTimeout
	}
	ctx, cancelClosed := context.WithCancelCause(ctx)
	stop := context.AfterFunc(closed, func() { cancelClosed(ErrClosed) })
	return ctx, budget, func() {
		stop()
		cancelClosed(nil)
		cancelTimeout()
	}
}

// ended is the error of a call whose ctx ended while it was doing what:
// ErrClosed when its dispatcher closed, a timeout that says what did not
// happen in time (late), or ctx's own cancellation.
func ended(ctx context.Context, what, late string) error {
	switch {
	case errors.Is(context.Cause(ctx), ErrClosed):
		return fmt.Errorf("cqrs: %s: %w", what, ErrClosed)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: %s: %w", ErrTimeout, late, context.DeadlineExceeded)
	}
	return fmt.Errorf("cqrs: %s: %w", what, ctx.Err())
}

// failed is the error of a call whose publish failed with err while it was
// doing what: ended's when ctx ended meanwhile, for a publisher that gives
// up when the message's context ends (its error says little more), or err.
func failed(ctx context.Context, err error, what, late string) error {
	if ctx.Err() != nil {
		return ended(ctx, what, late)
	}
	return fmt.Errorf("cqrs: %s: %w", what, err)
}

// round is a duration as error texts show it.
func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
