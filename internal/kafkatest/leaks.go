package kafkatest

import (
	"testing"

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
// ignore. A package's TestMain calls it.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	goleak.VerifyTestMain(m, append(opts, IgnoreSaramaMetrics())...)
}

// VerifyNoLeaks fails t when a goroutine started during t still runs once
// every cleanup of t has run. Call it first in the test, so that its check
// runs last.
func VerifyNoLeaks(t *testing.T) {
	t.Helper()
	current := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, current, IgnoreSaramaMetrics()) })
}
