package kafkatest

import (
	"testing"
	"time"
)

// pollInterval is how often WaitFor checks its condition.
const pollInterval = 10 * time.Millisecond

// WaitFor polls cond until it holds, failing t after Timeout with a message
// that names what it waited for.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", Timeout, what)
		}
		time.Sleep(pollInterval)
	}
}
