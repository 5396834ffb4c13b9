package reliability

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/kototest"
)

// brokerProcessEnv, set in the environment of the test binary, makes it
// run an embedded broker instead of the tests (see [brokerProcess]).
const brokerProcessEnv = "KOTO_RELIABILITY_BROKER_PROCESS"

func init() {
	if os.Getenv(brokerProcessEnv) != "" {
		os.Exit(runBrokerProcess())
	}
}

// runBrokerProcess starts an embedded broker, prints its address, and
// closes it once its standard input ends: when the test closes it or dies.
func runBrokerProcess() int {
	ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
	b, err := embedded.Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "broker process:", err)
		return 1
	}
	fmt.Println(b.Addrs()[0])
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = b.Close()
	return 0
}

// brokerProcess runs an embedded broker in a process of its own, the test
// binary run again, and returns its addresses; it stops when t ends.
// A broker in the test's process keeps every record in its heap, which
// would hide what the heap of the services does.
func brokerProcess(t testing.TB) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), brokerProcessEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the broker process: %v", err)
	}
	var waitErr error
	exited := make(chan struct{})
	addr := make(chan string, 1)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			addr <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
		waitErr = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
			if waitErr != nil {
				t.Errorf("broker process: %v", waitErr)
			}
		case <-time.After(kototest.DefaultTimeout):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("the broker process did not stop within %v of its input's end; killed", kototest.DefaultTimeout)
		}
	})
	select {
	case a := <-addr:
		return []string{a}
	case <-exited:
		t.Fatalf("the broker process ended before it printed its address: %v", waitErr)
	case <-time.After(kototest.DefaultTimeout):
		t.Fatalf("the broker process printed no address within %v", kototest.DefaultTimeout)
	}
	return nil
}
