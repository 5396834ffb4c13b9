package kafkatest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// IgnoreSaramaMetrics is the goleak option for the one process-wide ticker
// goroutine that sarama's go-metrics registry starts for meters on first
// use and never stops.
func IgnoreSaramaMetrics() goleak.Option {
	return goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick")
}

// VerifyTestMain runs the tests of m and fails when a goroutine is left
// over once they are done, other than those [IgnoreSaramaMetrics] and opts
// ignore, after waiting for it as [WaitNoLeaks] does. A package's TestMain
// calls it.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := WaitNoLeaks(Timeout, opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// VerifyNoLeaks fails t when a goroutine started during t still runs once
// every cleanup of t has run and [WaitNoLeaks] waited [Timeout] for it.
// Call it first in the test, so that its check runs last.
func VerifyNoLeaks(t *testing.T) {
	t.Helper()
	current := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		if err := WaitNoLeaks(Timeout, current); err != nil {
			t.Error(err)
		}
	})
}

// WaitNoLeaks waits up to timeout for every goroutine but the ignored ones
// (opts and [IgnoreSaramaMetrics]) to end, and returns goleak's report of
// those still running then. Some goroutines end only after the Close that
// stops them has returned: sarama's client closes each broker connection
// on a goroutine of its own, and the embedded broker ends its side of a
// connection once it reads the close. goleak's own retries give them under
// half a second, which a loaded machine can outlast; a goroutine that
// never ends still fails, after timeout.
func WaitNoLeaks(timeout time.Duration, opts ...goleak.Option) error {
	opts = append(opts, IgnoreSaramaMetrics())
	deadline := time.Now().Add(timeout)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pollInterval)
	}
}
