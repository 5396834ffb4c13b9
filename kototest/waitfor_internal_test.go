package kototest

import (
	"testing"
	"time"
)

// TestWaitCountIsBoundedByAStall: a count that moves at every look is
// waited for well past the stall bound (40 looks, 10 ms apart, against a
// bound of 50 ms); one that stops is given up on with the value it
// stopped at.
func TestWaitCountIsBoundedByAStall(t *testing.T) {
	const stall = 50 * time.Millisecond
	var n int64
	moving := func() int64 { n++; return n }
	if got, ok := waitCount(moving, 40, stall, pollInterval); !ok || got != 40 {
		t.Errorf("waitCount of a moving count = %d, %v; want 40, true", got, ok)
	}
	stopped := func() int64 { return n }
	if got, ok := waitCount(stopped, 41, stall, pollInterval); ok || got != 40 {
		t.Errorf("waitCount of a stopped count = %d, %v; want 40, false", got, ok)
	}
}
