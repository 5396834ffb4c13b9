package middleware_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/kototest"
)

func TestMain(m *testing.M) {
	kototest.VerifyTestMain(m,
		// Watermill's map repository for its Deduplicator (used only by the
		// comparison test) starts a cleanup goroutine on
		// context.Background() and offers no way to stop it.
		goleak.IgnoreTopFunction("github.com/ThreeDotsLabs/watermill/message/router/middleware.(*mapExpiringKeyRepository).cleanOutLoop"),
	)
}
