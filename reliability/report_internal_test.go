package reliability

import (
	"strings"
	"testing"
)

func TestTablePrintsRowsSorted(t *testing.T) {
	tb := table{rows: []row{
		{Scenario: "TestB", Checks: "b", Messages: 2, Losses: 1},
		{Scenario: "TestA", Checks: "a", Messages: 1, Duplicates: 3},
	}}
	var b strings.Builder
	tb.print(&b)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("table has %d lines, want header, rule and 2 rows:\n%s", len(lines), b.String())
	}
	if !strings.HasPrefix(lines[2], "| TestA | a |") || !strings.Contains(lines[2], "| 1 | 3 | 0 |") {
		t.Errorf("first row = %q", lines[2])
	}
	if !strings.HasPrefix(lines[3], "| TestB | b |") || !strings.Contains(lines[3], "| 2 | 0 | 1 |") {
		t.Errorf("second row = %q", lines[3])
	}
}
