package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// figure is one line of the all subcommand: a value of this project's code
// beside the baseline measured in the same run, their ratio, and the
// target the figure must meet, if any; a figure without one is shown.
type figure struct {
	name     string
	value    float64
	baseline float64 // 0 when the figure has none
	unit     string
	target   target
	note     string // printed below the table: why the target is what it is
}

// ratio returns value over baseline, or 0 without a baseline.
func (f figure) ratio() float64 {
	if f.baseline == 0 {
		return 0
	}
	return f.value / f.baseline
}

// target is what a figure must reach: its ratio, or its value when
// ofValue, compared with bound by cmp ("≥", "≤" or "<"). A guard is a
// bound that catches a regression, not a goal to reach. The zero target
// is none.
type target struct {
	cmp     string
	bound   float64
	ofValue bool
	unit    string // of the bound, when ofValue
	guard   bool
}

func atLeast(r float64) target { return target{cmp: "≥", bound: r} }
func atMost(r float64) target  { return target{cmp: "≤", bound: r} }

// guardAtMost is a guard against a ratio above r.
func guardAtMost(r float64) target { return target{cmp: "≤", bound: r, guard: true} }

func (t target) String() string {
	var s string
	switch {
	case t.cmp == "":
		return "-"
	case t.ofValue:
		s = fmt.Sprintf("%s %s %s", t.cmp, number(t.bound), t.unit)
	default:
		s = fmt.Sprintf("%s %s×", t.cmp, number(t.bound))
	}
	if t.guard {
		return "guard " + s
	}
	return s
}

// verdict says whether f meets its target: "met", "not met", or "-"
// without a target. A figure that could not be compared (no baseline)
// does not meet a ratio target.
func (f figure) verdict() string {
	t := f.target
	if t.cmp == "" {
		return "-"
	}
	x := f.ratio()
	if t.ofValue {
		x = f.value
	} else if f.baseline == 0 {
		return "not met"
	}
	ok := false
	switch t.cmp {
	case "≥":
		ok = x >= t.bound
	case "≤":
		ok = x <= t.bound
	case "<":
		ok = x < t.bound
	}
	if ok {
		return "met"
	}
	return "not met"
}

// printFigures writes one line per figure: name, value, baseline, ratio,
// target and verdict; then the figures' notes.
func printFigures(out io.Writer, figs []figure) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "figure\tvalue\tbaseline\tratio\ttarget\tverdict")
	for _, f := range figs {
		base, ratio := "-", "-"
		if f.baseline != 0 {
			base, ratio = number(f.baseline)+" "+f.unit, fmt.Sprintf("%.2f", f.ratio())
		}
		fmt.Fprintf(w, "%s\t%s %s\t%s\t%s\t%s\t%s\n", f.name, number(f.value), f.unit, base, ratio, f.target, f.verdict())
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, f := range figs {
		if f.note != "" {
			if _, err := fmt.Fprintf(out, "\n%s: %s\n", f.name, f.note); err != nil {
				return err
			}
		}
	}
	return nil
}

// number writes x with the digits that matter at its size.
func number(x float64) string {
	switch {
	case x >= 100 || x <= -100 || x == math.Trunc(x):
		return fmt.Sprintf("%.0f", x)
	case x >= 10 || x <= -10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}
