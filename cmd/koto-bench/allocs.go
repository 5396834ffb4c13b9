package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/internal/cli"
)

func allocsCommand() command {
	return command{
		summary: "allocations and bytes per message on the consumer path, with and without the middleware chain",
		run:     runAllocs,
	}
}

func parseAllocsFlags(args []string, out io.Writer) (time.Duration, error) {
	fs := cli.NewFlagSet("koto-bench allocs")
	benchtime := fs.Duration("benchtime", 500*time.Millisecond, "time per benchmark run")
	if err := cli.Parse(fs, out, args); err != nil {
		return 0, err
	}
	if *benchtime <= 0 {
		return 0, cli.Usagef("-benchtime must be positive")
	}
	return *benchtime, nil
}

// allocsNote says how the allocations are measured.
const allocsNote = "allocations per message: the no-op handler called directly with a new message per call, no Kafka\n" +
	"and no router (their allocations would drown the chain's); the message itself is counted on every path\n"

func runAllocs(ctx context.Context, args []string, out io.Writer) error {
	benchtime, err := parseAllocsFlags(args, out)
	if err != nil {
		return err
	}
	results, err := measureAllocs(benchtime)
	if err != nil {
		return err
	}
	fmt.Fprint(out, allocsNote+"\n")
	return printFigures(out, allocsFigures(results))
}

func measureAllocs(benchtime time.Duration) ([]benchmarks.AllocsResult, error) {
	if err := setBenchtime(benchtime); err != nil {
		return nil, err
	}
	return benchmarks.CompareAllocs()
}

// allocsFigures gives each path with the chain two figures, allocations
// and bytes per message, beside the handler alone's.
func allocsFigures(results []benchmarks.AllocsResult) []figure {
	var bare benchmarks.AllocsResult
	var figs []figure
	for _, r := range results {
		if !r.Case.Chain {
			bare = r
			continue
		}
		figs = append(figs,
			figure{name: "allocs/msg, " + r.Case.Name + " vs handler alone", value: float64(r.Allocs), baseline: float64(bare.Allocs), unit: "allocs"},
			figure{name: "bytes/msg, " + r.Case.Name + " vs handler alone", value: float64(r.Bytes), baseline: float64(bare.Bytes), unit: "B"})
	}
	return figs
}
