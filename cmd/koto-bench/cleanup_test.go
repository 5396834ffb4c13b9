package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

func TestParseCleanupFlags(t *testing.T) {
	f, err := parseCleanupFlags([]string{"-rows", "500", "-callers", "2", "-quiet", "100ms"}, io.Discard)
	if err != nil || f.rows != 500 || f.callers != 2 || f.quiet.Milliseconds() != 100 {
		t.Fatalf("parseCleanupFlags = %+v, %v", f, err)
	}
	if _, err := parseCleanupFlags([]string{"-rows", "0"}, io.Discard); err == nil {
		t.Fatal("zero rows accepted")
	}
}

// TestCleanupSubcommand runs a pass over a small table against the test
// database and checks that it deleted every row and printed both figures.
func TestCleanupSubcommand(t *testing.T) {
	pgtest.Pool(t) // fails or skips, as pgtest says, without PostgreSQL
	var out bytes.Buffer
	if err := run(t.Context(), []string{"cleanup", "-rows", "12000", "-callers", "2", "-quiet", "200ms"}, &out); err != nil {
		t.Fatalf("cleanup: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "deleted 12000 rows in") {
		t.Errorf("output does not say the pass deleted every row:\n%s", out.String())
	}
	lines := figureLines(out.String())
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "cleanup, rows deleted from 12000") ||
		!strings.Contains(lines[0], "rows/s") || !strings.Contains(lines[1], "≤ 2×") {
		t.Fatalf("unexpected figures:\n%s", out.String())
	}
}
