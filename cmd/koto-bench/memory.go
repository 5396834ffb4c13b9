package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/internal/cli"
)

// memoryTarget is the least ratio of the MemoryStore to Watermill's map
// repository on new keys. The duplicates have no target: an exact window
// needs a clock read that Watermill's map does without, and exactness
// wins.
const memoryTarget = 1.0

func memoryCommand() command {
	return command{
		summary: "idempotency.MemoryStore vs Watermill's map repository, new keys and duplicates",
		run:     runMemory,
	}
}

// memoryFlags are the memory subcommand's settings.
type memoryFlags struct {
	rounds    int
	benchtime time.Duration
}

func parseMemoryFlags(args []string, out io.Writer) (memoryFlags, error) {
	fs := cli.NewFlagSet("koto-bench memory")
	rounds := fs.Int("rounds", 4, "benchmark rounds per store and case, alternating which store goes first")
	benchtime := fs.Duration("benchtime", 250*time.Millisecond, "time per benchmark run")
	if err := cli.Parse(fs, out, args); err != nil {
		return memoryFlags{}, err
	}
	f := memoryFlags{rounds: *rounds, benchtime: *benchtime}
	if f.rounds < 1 || f.benchtime <= 0 {
		return memoryFlags{}, cli.Usagef("-rounds and -benchtime must be positive")
	}
	return f, nil
}

func runMemory(ctx context.Context, args []string, out io.Writer) error {
	f, err := parseMemoryFlags(args, out)
	if err != nil {
		return err
	}
	results, err := measureMemory(f)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "check+mark per message: MemoryStore IsProcessed, then MarkProcessed when new, vs Watermill's\n"+
		"map repository IsDuplicate; %d rounds of %v per store, alternating; new keys with a %v window\n"+
		"(marks expire while it runs), duplicates among 1024 keys marked before the run\n\n",
		f.rounds, f.benchtime, benchmarks.MemoryNewWindow)
	return printFigures(out, memoryFigures(results))
}

// memoryResult is what the memory subcommand measures.
type memoryResult struct {
	cases []benchmarks.MemoryResult
	// clock and watermillDup are the ops/s of a clock read alone and of
	// Watermill's map on duplicates, measured side by side.
	clock, watermillDup float64
}

func measureMemory(f memoryFlags) (memoryResult, error) {
	var r memoryResult
	if err := setBenchtime(f.benchtime); err != nil {
		return r, err
	}
	var err error
	if r.cases, err = benchmarks.CompareMemory(f.rounds); err != nil {
		return r, err
	}
	r.clock, r.watermillDup, err = benchmarks.CompareClockFloor(f.rounds)
	return r, err
}

// memoryFigures gives the MemoryStore's ratio to Watermill's map in each
// case, and, for the duplicates, the floor of an exact answer: one clock
// read against Watermill's whole duplicate path.
func memoryFigures(r memoryResult) []figure {
	figs := make([]figure, 0, len(r.cases)+1)
	for _, c := range r.cases {
		f := figure{name: "memory store vs Watermill map, " + c.Case.Name, value: c.Store, baseline: c.Watermill, unit: "ops/s"}
		if !c.Case.Duplicates() {
			f.target = atLeast(memoryTarget)
		}
		figs = append(figs, f)
	}
	if r.clock <= 0 || r.watermillDup <= 0 {
		return figs
	}
	return append(figs, figure{name: "memory, time of a clock read (floor of an exact duplicate) vs Watermill map duplicate",
		value: 1e9 / r.clock, baseline: 1e9 / r.watermillDup, unit: "ns"})
}
