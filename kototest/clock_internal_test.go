package kototest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalRecorder is a testing.TB whose Fatalf records its message and ends
// the goroutine, as the real one does, without failing the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestAdvanceRefusesWhatItCannotDo: a negative duration and a harness
// without a database each fail the test with what to change.
func TestAdvanceRefusesWhatItCannotDo(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Minute, "time does not go back"},
		{time.Minute, "start it without WithoutPostgres"},
	} {
		rec := &fatalRecorder{TB: t}
		h := &Harness{t: rec} // no pool: as WithoutPostgres leaves it
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.Advance(tc.d)
		}()
		<-done
		if !strings.Contains(rec.msg, tc.want) {
			t.Errorf("Advance(%v) failed with %q, want it to say %q", tc.d, rec.msg, tc.want)
		}
	}
}
