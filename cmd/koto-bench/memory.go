package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/koto-dev/watermill-koto/internal/benchmarks"
)

// memoryTarget is the least ratio of the MemoryStore to Watermill's map
// repository, on new keys and on duplicates.
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

func parseMemoryFlags(args []string) (memoryFlags, error) {
	fs := flag.NewFlagSet("memory", flag.ContinueOnError)
	rounds := fs.Int("rounds", 4, "benchmark rounds per store and case, alternating which store goes first")
	benchtime := fs.Duration("benchtime", 250*time.Millisecond, "time per benchmark run")
	if err := fs.Parse(args); err != nil {
		return memoryFlags{}, err
	}
	f := memoryFlags{rounds: *rounds, benchtime: *benchtime}
	if f.rounds < 1 || f.benchtime <= 0 {
		return memoryFlags{}, fmt.Errorf("-rounds and -benchtime must be positive")
	}
	return f, nil
}

func runMemory(ctx context.Context, args []string, out io.Writer) error {
	f, err := parseMemoryFlags(args)
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

func measureMemory(f memoryFlags) ([]benchmarks.MemoryResult, error) {
	if err := flag.Set("test.benchtime", f.benchtime.String()); err != nil {
		return nil, err
	}
	return benchmarks.CompareMemory(f.rounds)
}

func memoryFigures(results []benchmarks.MemoryResult) []figure {
	figs := make([]figure, 0, len(results))
	for _, r := range results {
		figs = append(figs, figure{name: "memory store vs Watermill map, " + r.Case.Name,
			value: r.Store, baseline: r.Watermill, unit: "ops/s", target: atLeast(memoryTarget)})
	}
	return figs
}
