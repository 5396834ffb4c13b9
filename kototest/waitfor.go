package kototest

import (
	"context"
	"testing"
	"time"
)

// DefaultTimeout bounds every wait of this package's helpers, and
// [Harness.Wait] unless [Timeout] says otherwise; a healthy run needs a
// fraction of it.
const DefaultTimeout = 30 * time.Second

// pollInterval is how often WaitFor checks its condition.
const pollInterval = 10 * time.Millisecond

// Context returns a context that ends after [DefaultTimeout] or when t
// finishes.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	t.Cleanup(cancel)
	return ctx
}

// WaitFor polls cond until it holds, failing t after [DefaultTimeout] with
// a message that names what it waited for.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(DefaultTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("kototest: timed out after %v waiting for %s", DefaultTimeout, what)
		}
		time.Sleep(pollInterval)
	}
}

// WaitForCount polls count until it reaches want, failing t once count
// has not moved for [DefaultTimeout]: a wait for a volume, which a slow
// machine takes long to handle, is bounded by a stall rather than by its
// total time.
func WaitForCount(t testing.TB, what string, count func() int64, want int64) {
	t.Helper()
	if got, ok := waitCount(count, want, DefaultTimeout, pollInterval); !ok {
		t.Fatalf("kototest: %s stood at %d for %v, want %d", what, got, DefaultTimeout, want)
	}
}

// waitCount polls count every interval until it reaches want (true) or
// has not moved for stall (false), and returns the last count.
func waitCount(count func() int64, want int64, stall, every time.Duration) (int64, bool) {
	last, moved := count(), time.Now()
	for last < want {
		if time.Since(moved) > stall {
			return last, false
		}
		time.Sleep(every)
		if n := count(); n != last {
			last, moved = n, time.Now()
		}
	}
	return last, true
}
