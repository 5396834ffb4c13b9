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
