package correlation_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a goroutine outlives the tests. The package
// starts none; the check keeps it that way.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
