package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/internal/cli"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// cleanupP99Target is the most that a cleanup pass may multiply the p99
// latency of the marks made while it runs.
const cleanupP99Target = 2.0

func cleanupCommand() command {
	return command{
		summary: "PostgreSQL store Cleanup: rows/s deleted, p99 of concurrent marks while it runs vs without it",
		run:     runCleanup,
	}
}

// cleanupFlags are the cleanup subcommand's settings.
type cleanupFlags struct {
	rows, callers int
	quiet         time.Duration
}

func parseCleanupFlags(args []string, out io.Writer) (cleanupFlags, error) {
	fs := cli.NewFlagSet("koto-bench cleanup")
	rows := fs.Int("rows", 1_000_000, "expired marks in the table before the pass")
	callers := fs.Int("callers", 4, "goroutines making marks, with the pass and without it")
	quiet := fs.Duration("quiet", 4*time.Second, "time the callers make marks without a pass running, half before it and half after")
	if err := cli.Parse(fs, out, args); err != nil {
		return cleanupFlags{}, err
	}
	f := cleanupFlags{rows: *rows, callers: *callers, quiet: *quiet}
	if f.rows < 1 || f.callers < 1 || f.quiet <= 0 {
		return cleanupFlags{}, cli.Usagef("-rows, -callers and -quiet must be positive")
	}
	return f, nil
}

func runCleanup(ctx context.Context, args []string, out io.Writer) error {
	f, err := parseCleanupFlags(args, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "one Cleanup pass over %d expired marks (random keys, window %v) while %d goroutines\n"+
		"make marks (MarkProcessed of new keys), vs the same marks for %v without a pass (half before, half after)\n\n",
		f.rows, benchmarks.CleanupWindow, f.callers, f.quiet)
	r, err := measureCleanup(ctx, f)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "deleted %d rows in %.2f s; marks: %d without the pass (p50 %.2f ms, p99 %.2f ms), "+
		"%d during it (p50 %.2f ms, p99 %.2f ms)\n\n", r.Deleted, r.Elapsed.Seconds(),
		r.QuietMarks, ms(r.Quiet.Median), ms(r.Quiet.P99), r.DuringMarks, ms(r.During.Median), ms(r.During.P99))
	return printFigures(out, cleanupFigures(r))
}

func measureCleanup(ctx context.Context, f cleanupFlags) (benchmarks.CleanupResult, error) {
	pool, closePool, err := benchPool(ctx, int32(f.callers+2))
	if err != nil {
		return benchmarks.CleanupResult{}, err
	}
	defer closePool()
	schema := pgtest.Name("koto_bench_cleanup")
	defer dropSchema(pool, schema)
	c, err := benchmarks.NewCleanup(ctx, pool, schema)
	if err != nil {
		return benchmarks.CleanupResult{}, err
	}
	defer c.Close()
	r, err := benchmarks.MeasureCleanup(ctx, c, f.rows, f.callers, f.quiet)
	if err == nil && r.Deleted != r.Rows {
		err = fmt.Errorf("cleanup deleted %d of %d expired marks", r.Deleted, r.Rows)
	}
	return r, err
}

func cleanupFigures(r benchmarks.CleanupResult) []figure {
	return []figure{
		{name: fmt.Sprintf("cleanup, rows deleted from %d", r.Rows), value: r.Rate(), unit: "rows/s"},
		{name: "cleanup, p99 of concurrent marks vs without it", value: ms(r.During.P99), baseline: ms(r.Quiet.P99),
			unit: "ms", target: atMost(cleanupP99Target)},
	}
}
