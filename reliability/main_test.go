package reliability

import (
	"fmt"
	"os"
	"testing"

	"github.com/koto-dev/watermill-koto/internal/kafkatest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	report.print(os.Stdout)
	if code == 0 {
		if err := kafkatest.WaitNoLeaks(kafkatest.Timeout); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
