package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/internal/kafkatest"
)

func TestMain(m *testing.M) {
	kafkatest.VerifyTestMain(m)
}

func TestRunPrintsAddressAndStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr kafkatest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-port", "0", "-data-dir", t.TempDir(), "-partitions", "2", "-topics", "a,b"}, &stdout, &stderr)
	}()

	deadline := time.After(30 * time.Second)
	for !strings.Contains(stdout.String(), "listening on 127.0.0.1:") {
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v (stderr: %s)", err, stderr.String())
		case <-deadline:
			t.Fatalf("no address printed; stdout %q", stdout.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	assertTopics(t, stdout.String(), 2, "a", "b")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// assertTopics checks, on the broker whose address run printed in out, that
// each of names exists with the given number of partitions: the -topics and
// -partitions flags reached the broker.
func assertTopics(t *testing.T, out string, partitions int, names ...string) {
	t.Helper()
	_, addr, _ := strings.Cut(strings.TrimSpace(strings.SplitN(out, "\n", 2)[0]), "listening on ")
	details, err := kafkatest.Admin(t, strings.Split(addr, ",")).ListTopics(kafkatest.Context(t), names...)
	if err != nil {
		t.Fatalf("list topics on %s: %v", addr, err)
	}
	for _, name := range names {
		d, ok := details[name]
		if !ok || d.Err != nil {
			t.Errorf("topic %s on %s: exists %v, error %v; want it created by -topics", name, addr, ok, d.Err)
			continue
		}
		if n := len(d.Partitions); n != partitions {
			t.Errorf("topic %s has %d partitions, want %d (-partitions)", name, n, partitions)
		}
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-partitions", "-1"},
		{"-port", "-5"},
		{"-topics", "bad topic!"},
		{"-no-such-flag"},
	} {
		var out kafkatest.Buffer
		if err := run(context.Background(), args, &out, &out); err == nil {
			t.Errorf("run(%q) succeeded, want an error", args)
		}
	}
}
