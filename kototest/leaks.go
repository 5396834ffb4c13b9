package kototest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// ignoreSaramaMetrics is the goleak option for the one process-wide ticker
// goroutine that sarama's go-metrics registry starts for meters on first
// use and never stops.
func ignoreSaramaMetrics() goleak.Option {
	return goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick")
}

// VerifyTestMain runs the tests of m and fails when a goroutine is left
// over once they are done, other than those opts ignore, after waiting for
// it as [WaitNoLeaks] does. A package's TestMain calls it.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := WaitNoLeaks(DefaultTimeout, opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// VerifyNoLeaks fails t when a goroutine started during t still runs once
// every cleanup of t has run and [WaitNoLeaks] waited [DefaultTimeout] for
// it. Call it first in the test, so that its check runs last.
func VerifyNoLeaks(t *testing.T) {
	t.Helper()
	current := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		if err := WaitNoLeaks(DefaultTimeout, current); err != nil {
			t.Error(err)
		}
	})
}

// WaitNoLeaks waits up to timeout for every goroutine but those opts
// ignore, and sarama's metrics ticker, which runs as long as the process,
// to end, and returns goleak's report of those still running then.
func WaitNoLeaks(timeout time.Duration, opts ...goleak.Option) error {
	// Some goroutines end only after the Close that stops them returned:
	// sarama closes each broker connection on a goroutine of its own, and
	// the embedded broker ends its side once it reads the close. goleak's
	// own retries give them under half a second, which a loaded machine
	// can outlast.
	opts = append(opts, ignoreSaramaMetrics())
	deadline := time.Now().Add(timeout)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pollInterval)
	}
}
