package deadletter

import (
	"slices"
	"testing"
)

// TestRangesUpTo: ends lower a range's end, never raise it, and leave a
// partition they lack empty; nil ends change nothing.
func TestRangesUpTo(t *testing.T) {
	rs := partitionRanges{{partition: 0, start: 2, end: 10}, {partition: 1, start: 0, end: 5}, {partition: 2, start: 4, end: 8}}
	got := rs.upTo(map[int32]int64{0: 7, 1: 9})
	want := partitionRanges{{partition: 0, start: 2, end: 7}, {partition: 1, start: 0, end: 5}, {partition: 2, start: 4, end: 4}}
	if !slices.Equal(got, want) || got.records() != 10 {
		t.Errorf("upTo = %v (%d records), want %v (10)", got, got.records(), want)
	}
	if got := rs.upTo(nil); !slices.Equal(got, rs) {
		t.Errorf("upTo(nil) = %v, want %v", got, rs)
	}
	if rs[0].end != 10 {
		t.Errorf("upTo changed its receiver: %v", rs)
	}
}
