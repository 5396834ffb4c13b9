package idempotency

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine outlives the tests. Watermill's
// map repository, measured beside MemoryStore in the benchmarks, starts a
// cleanup goroutine that nothing can stop; it alone is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(
		"github.com/ThreeDotsLabs/watermill/message/router/middleware.(*mapExpiringKeyRepository).cleanOutLoop"))
}
