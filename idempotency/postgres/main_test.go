package postgres_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a goroutine outlives the tests: a background
// cleanup that Close did not stop, or a pool left open.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
