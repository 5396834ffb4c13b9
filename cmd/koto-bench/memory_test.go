package main

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"
)

func TestParseMemoryFlags(t *testing.T) {
	f, err := parseMemoryFlags([]string{"-rounds", "2", "-benchtime", "10ms"}, io.Discard)
	if err != nil || f.rounds != 2 || f.benchtime.Milliseconds() != 10 {
		t.Fatalf("parseMemoryFlags = %+v, %v", f, err)
	}
	if _, err := parseMemoryFlags([]string{"-rounds", "0"}, io.Discard); err == nil {
		t.Fatal("zero rounds accepted")
	}
}

// TestMemorySubcommand runs the comparison briefly and checks that it
// prints the four cases, each with both stores' throughput and a verdict.
func TestMemorySubcommand(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"memory", "-rounds", "1", "-benchtime", "5ms"}, &out); err != nil {
		t.Fatalf("memory: %v\n%s", err, out.String())
	}
	lines := figureLines(out.String())
	if len(lines) != 5 {
		t.Fatalf("%d figure lines, want 5:\n%s", len(lines), out.String())
	}
	for i, want := range []string{"new keys, 1 goroutine", "new keys,", "duplicates, 1 goroutine", "duplicates,"} {
		fields := strings.Fields(lines[i][strings.Index(lines[i], "goroutine"):])
		// goroutine(s) value ops/s baseline ops/s ratio ≥ 1× verdict...
		if !strings.Contains(lines[i], want) || len(fields) < 8 || positive(fields[1]) <= 0 || positive(fields[3]) <= 0 {
			t.Errorf("line %d: %q", i, lines[i])
		}
	}
	if !strings.Contains(lines[4], "clock read") || !strings.Contains(lines[4], " ns ") {
		t.Errorf("no clock read figure: %q", lines[4])
	}
}

// positive parses s as a number, or returns -1.
func positive(s string) float64 {
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return -1
	}
	return x
}
