package reliability

import (
	"fmt"
	"os"
	"testing"

	"github.com/koto-dev/watermill-koto/kototest"
)

// TestMain runs the tests, or, in a test binary that a scenario started
// again as a subprocess, the role that roleEnv names.
func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role))
	}
	code := m.Run()
	report.print(os.Stdout)
	if code == 0 {
		if err := kototest.WaitNoLeaks(kototest.DefaultTimeout); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
