package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestAllocsSubcommand measures the paths briefly and checks that the
// chain is reported against the bare handler, allocating more than it.
func TestAllocsSubcommand(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"allocs", "-benchtime", "20ms"}, &out); err != nil {
		t.Fatalf("allocs: %v\n%s", err, out.String())
	}
	lines := figureLines(out.String())
	if len(lines) != 6 {
		t.Fatalf("%d figure lines, want 6:\n%s", len(lines), out.String())
	}
	for _, l := range lines {
		rest := strings.Fields(l[strings.Index(l, "handler alone")+len("handler alone"):])
		// value unit baseline unit ratio - -
		if len(rest) != 7 || positive(rest[0]) <= positive(rest[2]) || positive(rest[2]) <= 0 {
			t.Errorf("want the chain to allocate more than the handler alone: %q", l)
		}
	}
	if !strings.Contains(out.String(), "no Kafka") {
		t.Errorf("output does not say how it measures:\n%s", out.String())
	}
}
