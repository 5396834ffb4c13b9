package parking_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/kototest"
)

func TestMain(m *testing.M) {
	kototest.VerifyTestMain(m,
		// After a failed produce, a sarama producer's circuit breaker
		// sleeps 10 s in a goroutine of its own, which outlives the
		// closed producer by up to that long and then ends.
		goleak.IgnoreAnyFunction("github.com/eapache/go-resiliency/breaker.(*Breaker).timer"),
	)
}
