package outbox

import (
	"testing"
	"time"
)

// TestHeldWaitGrowsToASecond: the wait behind an older transaction starts
// at a millisecond, doubles, and stops at 1 024 ms however long the
// transaction runs, or at a shorter PollInterval.
func TestHeldWaitGrowsToASecond(t *testing.T) {
	for _, tc := range []struct {
		behind int
		poll   time.Duration
		want   time.Duration
	}{
		{0, time.Hour, time.Millisecond},
		{3, time.Hour, 8 * time.Millisecond},
		{10, time.Hour, 1024 * time.Millisecond},
		{30, time.Hour, 1024 * time.Millisecond},
		{1000, time.Hour, 1024 * time.Millisecond},
		{30, 200 * time.Millisecond, 200 * time.Millisecond},
	} {
		if got := heldWait(tc.behind, tc.poll); got != tc.want {
			t.Errorf("heldWait(%d, %v) = %v, want %v", tc.behind, tc.poll, got, tc.want)
		}
	}
}
