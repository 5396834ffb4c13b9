package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/internal/cli"
)

func allCommand() command {
	return command{
		summary: "every figure of the performance targets, one line each: value, baseline, ratio, target, verdict",
		run:     runAll,
	}
}

// section is one subcommand's part of the all subcommand: its
// measurement at the sizes of a full or a quick run, turned into figures.
type section struct {
	name    string
	figures func(ctx context.Context) ([]figure, error)
}

// allSections returns the sections in the order they run: the ones
// without Kafka first.
func allSections(quick bool, brokers []string) []section {
	size := func(full, q int) int {
		if quick {
			return q
		}
		return full
	}
	dur := func(full, q time.Duration) time.Duration {
		if quick {
			return q
		}
		return full
	}
	return []section{
		{"store", func(ctx context.Context) ([]figure, error) {
			r, err := measureStore(ctx, storeFlags{callers: []int{1, 4, 16}, rounds: size(2, 1),
				benchtime: dur(500*time.Millisecond, 50*time.Millisecond)}, io.Discard)
			return storeFigures(r), err
		}},
		{"memory", func(context.Context) ([]figure, error) {
			r, err := measureMemory(memoryFlags{rounds: size(4, 1), benchtime: dur(250*time.Millisecond, 25*time.Millisecond)})
			return memoryFigures(r), err
		}},
		{"allocs", func(context.Context) ([]figure, error) {
			r, err := measureAllocs(dur(300*time.Millisecond, 50*time.Millisecond))
			return allocsFigures(r), err
		}},
		{"cleanup", func(ctx context.Context) ([]figure, error) {
			r, err := measureCleanup(ctx, cleanupFlags{rows: size(1_000_000, 20_000), callers: 4, quiet: dur(6*time.Second, 600*time.Millisecond)})
			return cleanupFigures(r), err
		}},
		{"e2e", func(ctx context.Context) ([]figure, error) {
			var figs []figure
			f := e2eFlags{messages: size(3000, 200), rounds: size(3, 1), conns: 8, brokers: brokers}
			err := measureE2E(ctx, f, io.Discard, func(r []benchmarks.E2EResult) error {
				figs = e2eFigures(r)
				return nil
			})
			return figs, err
		}},
		{"concurrent", func(ctx context.Context) ([]figure, error) {
			r, err := measureConcurrent(ctx, concurrentFlags{messages: size(3000, 200), latency: size(3000, 200),
				rounds: size(3, 1), brokers: brokers}, io.Discard)
			return concurrentFigures(r), err
		}},
		{"batch", func(ctx context.Context) ([]figure, error) {
			r, err := measureBatch(ctx, batchFlags{messages: size(3000, 200), batchMessages: size(30000, 2000),
				latency: dur(2*time.Second, 300*time.Millisecond), rounds: size(3, 1), brokers: brokers}, io.Discard)
			return batchFigures(r), err
		}},
		{"outbox", func(ctx context.Context) ([]figure, error) {
			r, err := measureOutbox(ctx, outboxFlags{messages: size(20000, 2000), watermill: size(1000, 100), rounds: size(2, 1),
				latency: size(500, 60), interval: 5 * time.Millisecond, brokers: brokers}, io.Discard)
			return outboxFigures(r), err
		}},
		{"schedule", func(ctx context.Context) ([]figure, error) {
			r, err := measureSchedule(ctx, scheduleFlags{late: size(5000, 300), spread: dur(10*time.Second, time.Second),
				due: size(1_000_000, 20_000), brokers: brokers}, io.Discard)
			return scheduleFigures(r), err
		}},
		{"reqreply", func(ctx context.Context) ([]figure, error) {
			r, err := measureReqReply(ctx, reqreplyFlags{rounds: size(2000, 100), warmup: size(200, 10), size: 100, brokers: brokers}, io.Discard)
			return reqreplyFigures(r), err
		}},
	}
}

func runAll(ctx context.Context, args []string, out io.Writer) error {
	fs := cli.NewFlagSet("koto-bench all")
	quick := fs.Bool("quick", false, "small sizes: a check that everything runs, in well under 30 s; its figures are rough")
	only := fs.String("only", "", "comma-separated sections to run (default all: store,memory,allocs,cleanup,e2e,concurrent,batch,outbox,schedule,reqreply)")
	brokers := brokersFlag(fs, "section")
	if err := cli.Parse(fs, out, args); err != nil {
		return err
	}
	sections, err := pick(allSections(*quick, brokers()), *only)
	if err != nil {
		return err
	}
	mode := "full run"
	if *quick {
		mode = "quick run (-quick): small sizes, rough figures"
	}
	fmt.Fprintf(out, "koto-bench all, %s, on %d cores (GOMAXPROCS %d); each ratio is against a baseline measured in the same run.\n"+
		"value and baseline: higher is better for ops/s, msg/s and rows/s, lower for ns, ms, µs, allocs and B.\n"+
		"target: a goal the figure must reach; a guard is a bound that catches a regression, not a goal; - is a figure shown without one.\n%s\n",
		mode, runtime.NumCPU(), runtime.GOMAXPROCS(0), allocsNote)
	figs, took, errs := runSections(ctx, sections)
	if err := printFigures(out, figs); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nsections: %s\n", strings.Join(took, ", "))
	return errors.Join(errs...)
}

// runSections runs each section, going on after one fails, and returns the
// figures, how long each section took, and the errors.
func runSections(ctx context.Context, sections []section) (figs []figure, took []string, errs []error) {
	for _, s := range sections {
		start := time.Now()
		f, err := s.figures(ctx)
		took = append(took, fmt.Sprintf("%s %.0f s", s.name, time.Since(start).Seconds()))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
			f = append(f, figure{name: s.name + ": failed, " + err.Error(), target: atLeast(1)})
		}
		figs = append(figs, f...)
		if ctx.Err() != nil {
			break
		}
	}
	return figs, took, errs
}

// pick returns the sections named in only, a comma-separated list, or all
// when it is empty.
func pick(sections []section, only string) ([]section, error) {
	if only == "" {
		return sections, nil
	}
	var out []section
	for _, name := range strings.Split(only, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, s := range sections {
			if s.name == name {
				out, found = append(out, s), true
			}
		}
		if !found {
			return nil, cli.Usagef("-only: no section %q", name)
		}
	}
	return out, nil
}
