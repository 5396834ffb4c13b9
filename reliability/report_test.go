package reliability

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
)

// row is one scenario's line in the table the suite prints at the end.
type row struct {
	Scenario   string // the test's name
	Checks     string // what the scenario asserts
	Faults     string // what it injected
	Messages   int    // distinct messages sent
	Duplicates int    // effects beyond one per distinct message
	Losses     int    // distinct messages without an effect
	Note       string // anything else worth a figure (rates, heap, in-flight bound)
}

// report collects the rows of the scenarios that ran. It is the suite's
// one package-level value because TestMain prints it after every test has
// ended, and tests have no other way to hand TestMain a result.
var report table

type table struct {
	mu   sync.Mutex
	rows []row
}

// record adds r to the table; the scenario's name comes from t.
func record(t testing.TB, r row) {
	t.Helper()
	r.Scenario = t.Name()
	t.Logf("%s: messages=%d duplicates=%d losses=%d %s", r.Scenario, r.Messages, r.Duplicates, r.Losses, r.Note)
	report.mu.Lock()
	defer report.mu.Unlock()
	report.rows = append(report.rows, r)
}

// print writes the table as Markdown, rows sorted by scenario.
func (tb *table) print(w io.Writer) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.rows) == 0 {
		return
	}
	rows := slices.Clone(tb.rows)
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.Scenario, b.Scenario) })
	fmt.Fprintln(w, "| scenario | checks | faults injected | messages | duplicates | losses | notes |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %d | %s |\n",
			r.Scenario, r.Checks, r.Faults, r.Messages, r.Duplicates, r.Losses, r.Note)
	}
}
