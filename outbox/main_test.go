package outbox_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// sarama's go-metrics registry starts one process-wide ticker
		// goroutine for meters on first use and never stops it.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		// After a failed produce, a sarama producer's circuit breaker
		// sleeps 10 s in a goroutine of its own, which outlives the
		// closed producer by up to that long and then ends.
		goleak.IgnoreAnyFunction("github.com/eapache/go-resiliency/breaker.(*Breaker).timer"),
	)
}
