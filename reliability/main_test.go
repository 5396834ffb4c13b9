package reliability

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/koto-dev/watermill-koto/kototest"
)

// fullSize runs the scenarios at their full sizes; without it they run
// smaller, to keep the module's go test within minutes.
var fullSize = flag.Bool("full", false, "run the scenarios at full size (8–11 minutes on 2 cores: add -timeout 30m)")

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
