package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// TestMain fails the run if any goroutine outlives the tests. Watermill's
// map repository, measured beside MemoryStore, starts a cleaning goroutine
// that nothing can stop; it alone is ignored.
func TestMain(m *testing.M) {
	kototest.VerifyTestMain(m, goleak.IgnoreTopFunction(
		"github.com/ThreeDotsLabs/watermill/message/router/middleware.(*mapExpiringKeyRepository).cleanOutLoop"))
}

func TestRunRejectsUnknownSubcommands(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}} {
		err := run(context.Background(), args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "store") {
			t.Fatalf("run(%q) = %v; want an error listing the subcommands", args, err)
		}
	}
}

func TestParseStoreFlags(t *testing.T) {
	f, err := parseStoreFlags([]string{"-callers", "2, 8", "-rounds", "1", "-benchtime", "50ms"}, io.Discard)
	if err != nil || len(f.callers) != 2 || f.callers[1] != 8 || f.rounds != 1 || f.benchtime.Milliseconds() != 50 {
		t.Fatalf("parseStoreFlags = %+v, %v", f, err)
	}
	if _, err := parseStoreFlags([]string{"-callers", "0"}, io.Discard); err == nil {
		t.Fatal("zero callers accepted")
	}
}

// TestStoreSubcommand runs the store comparison briefly against the test
// database and checks the table it prints.
func TestStoreSubcommand(t *testing.T) {
	pgtest.Pool(t) // fails or skips, as pgtest says, without PostgreSQL
	var out bytes.Buffer
	err := run(t.Context(), []string{"store", "-callers", "1,2", "-rounds", "1", "-benchtime", "20ms"}, &out)
	if err != nil {
		t.Fatalf("store: %v\n%s", err, out.String())
	}
	lines := strings.Split(out.String(), "\n")
	var rows int
	for _, l := range lines {
		fields := strings.Fields(l)
		if len(fields) == 4 && (fields[0] == "1" || fields[0] == "2") {
			rows++
		}
	}
	if !strings.Contains(out.String(), "raw ops/s") || rows != 2 {
		t.Fatalf("unexpected output:\n%s", out.String())
	}
}
