package scheduleid

import (
	"testing"

	"github.com/google/uuid"
)

// TestSetMillis: a due time written into an ID reads back the same and
// leaves the ID's other bits alone; one out of range is held within it.
func TestSetMillis(t *testing.T) {
	id := uuid.New()
	for _, tc := range []struct{ set, want int64 }{
		{0, 0}, {1_764_000_000_123, 1_764_000_000_123}, {MaxMillis, MaxMillis}, {-5, 0}, {MaxMillis + 1, MaxMillis},
	} {
		got := id
		SetMillis(&got, tc.set)
		if Millis(got) != tc.want {
			t.Errorf("SetMillis(%d) reads back %d, want %d", tc.set, Millis(got), tc.want)
		}
		if [10]byte(got[6:]) != [10]byte(id[6:]) {
			t.Errorf("SetMillis(%d) changed the ID's bits after the due time: %s, was %s", tc.set, got, id)
		}
	}
}
