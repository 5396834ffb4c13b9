package outbox_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/kototest"
)

// TestMain runs the tests, or, in a test binary that a test started again
// as a subprocess, the forwarder that forwarderEnv describes.
func TestMain(m *testing.M) {
	if raw := os.Getenv(forwarderEnv); raw != "" {
		os.Exit(runForwarderProcess(raw))
	}
	kototest.VerifyTestMain(m,
		// After a failed produce, a sarama producer's circuit breaker
		// sleeps 10 s in a goroutine of its own, which outlives the
		// closed producer by up to that long and then ends.
		goleak.IgnoreAnyFunction("github.com/eapache/go-resiliency/breaker.(*Breaker).timer"),
	)
}
