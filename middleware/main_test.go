package middleware_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// sarama's go-metrics registry starts one process-wide ticker
		// goroutine for meters on first use and never stops it.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		// Watermill's map repository for its Deduplicator (used only by the
		// comparison test) starts a cleanup goroutine on
		// context.Background() and offers no way to stop it.
		goleak.IgnoreTopFunction("github.com/ThreeDotsLabs/watermill/message/router/middleware.(*mapExpiringKeyRepository).cleanOutLoop"),
	)
}
