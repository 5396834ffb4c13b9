package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/internal/cli"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

func e2eCommand() command {
	return command{
		summary: "idempotent consumer end to end (Kafka → router → middleware → handler writing to PostgreSQL) vs no idempotency",
		run:     runE2E,
	}
}

// e2eFlags are the e2e subcommand's settings.
type e2eFlags struct {
	messages, rounds, conns int
	direct, telemetry       bool
	brokers                 []string
}

// variants returns the variants the flags ask for.
func (f e2eFlags) variants() []benchmarks.E2EVariant {
	v := benchmarks.E2EVariants()
	if f.telemetry {
		v = append(v, benchmarks.E2ETelemetryVariants()...)
	}
	return v
}

func parseE2EFlags(args []string, out io.Writer) (e2eFlags, error) {
	fs := cli.NewFlagSet("koto-bench e2e")
	messages := fs.Int("messages", 3000, "messages per run; each variant runs once per round")
	rounds := fs.Int("rounds", 5, "rounds; each runs every variant, in an order rotated by one per round")
	conns := fs.Int("conns", 2*benchmarks.E2EPartitions, "PostgreSQL pool size (at least partitions + 2)")
	direct := fs.Bool("direct", true, "also run each variant's chain and handler without Kafka and the router")
	tel := fs.Bool("telemetry", false, "also run the write and no-op variants with the OpenTelemetry SDK configured and without the telemetry middleware, and report the cost per message")
	brokers := brokersFlag(fs, "")
	if err := cli.Parse(fs, out, args); err != nil {
		return e2eFlags{}, err
	}
	f := e2eFlags{messages: *messages, rounds: *rounds, conns: *conns, direct: *direct, telemetry: *tel}
	if f.messages < 1 || f.rounds < 1 || f.conns < benchmarks.E2EPartitions+2 {
		return e2eFlags{}, cli.Usagef("-messages and -rounds must be at least 1, -conns at least %d", benchmarks.E2EPartitions+2)
	}
	f.brokers = brokers()
	return f, nil
}

func runE2E(ctx context.Context, args []string, out io.Writer) error {
	f, err := parseE2EFlags(args, out)
	if err != nil {
		return err
	}
	printed := false
	return measureE2E(ctx, f, out, func(results []benchmarks.E2EResult) error {
		if printed {
			fmt.Fprintf(out, "\nthe same chains and handlers called directly, without Kafka and the router, from %d goroutines:\n\n",
				benchmarks.E2EPartitions)
		}
		printed = true
		return printE2E(out, results)
	})
}

// measureE2E sets the benchmark up, writes what it runs to out, and gives
// report the results through the router, then, with f.direct, those of the
// direct calls.
func measureE2E(ctx context.Context, f e2eFlags, out io.Writer, report func([]benchmarks.E2EResult) error) error {
	b, err := newE2EBench(ctx, f.brokers, int32(f.conns), "koto_bench_e2e")
	if err != nil {
		return err
	}
	defer b.stop()
	e := b.E2E

	fmt.Fprintf(out, "%d messages per run on %s, %d partitions, router → middleware.Defaults → handler;\n"+
		"PostgreSQL pool of %d connections; %d rounds, each variant once per round in a rotating order\n\n",
		f.messages, b.where, benchmarks.E2EPartitions, b.pool.Config().MaxConns, f.rounds)
	if err := warmUp(ctx, e.Consume, f.variants(), f.messages); err != nil {
		return err
	}
	results, err := benchmarks.CompareE2E(ctx, e.Consume, f.variants(), f.messages, f.rounds)
	if err != nil {
		return err
	}
	if err := report(results); err != nil || !f.direct {
		return err
	}
	if results, err = benchmarks.CompareE2E(ctx, e.Direct, f.variants(), f.messages, f.rounds); err != nil {
		return err
	}
	return report(results)
}

// e2eBench is an end-to-end benchmark set up for a subcommand, with what
// it runs on.
type e2eBench struct {
	*benchmarks.E2E
	pool  *pgxpool.Pool
	where string // the Kafka brokers, in words
	stop  func() // closes the benchmark, the pool and the embedded broker
}

// newE2EBench sets up an end-to-end benchmark on brokers, or on an
// embedded broker when there are none, and a pool of conns connections,
// under a new name that starts with prefix.
func newE2EBench(ctx context.Context, brokers []string, conns int32, prefix string) (b e2eBench, err error) {
	addrs, where, stopKafka, err := kafkaFor(ctx, brokers)
	if err != nil {
		return b, err
	}
	pool, closePool, err := benchPool(ctx, conns)
	if err != nil {
		stopKafka()
		return b, err
	}
	e, err := benchmarks.NewE2E(ctx, addrs, pool, pgtest.Name(prefix))
	if err != nil {
		closePool()
		stopKafka()
		return b, err
	}
	return e2eBench{E2E: e, pool: pool, where: where, stop: func() { _ = e.Close(); closePool(); stopKafka() }}, nil
}

// warmUpMessages is the most messages of the untimed run that warmUp
// gives each variant.
const warmUpMessages = 200

// warmUp runs every variant once, untimed, with a few messages, so that no
// timed run pays for opening the pool's connections or preparing
// statements: otherwise the first run of the first round, a baseline's,
// would, flattering the ratios to it. (The direct runs come after, on the
// same warm pool.)
func warmUp(ctx context.Context, run benchmarks.E2ERunner, variants []benchmarks.E2EVariant, n int) error {
	for _, v := range variants {
		if _, err := run(ctx, v, min(n, warmUpMessages)); err != nil {
			return fmt.Errorf("%s, warm-up: %w", v.Name, err)
		}
	}
	return nil
}

func printE2E(out io.Writer, results []benchmarks.E2EResult) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "variant\tmsg/s\tvs baseline\tper round\ttarget\t")
	for _, r := range results {
		ratio, spread, target := "baseline", "", "-"
		if r.Variant.Baseline != "" {
			ratio = fmt.Sprintf("%.2f × %s", r.Ratio, r.Variant.Baseline)
			spread = fmt.Sprintf("%.2f–%.2f", r.MinRatio, r.MaxRatio)
		}
		if r.Variant.Target > 0 {
			target = fmt.Sprintf("≥ %.1f", r.Variant.Target)
		}
		fmt.Fprintf(w, "%s\t%.0f\t%s\t%s\t%s\t\n", r.Variant.Name, r.Rate(), ratio, spread, target)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	printAlso(out, results)
	printOwnTx(out, results)
	printTelemetryCost(out, results)
	for _, r := range results {
		if r.Variant.Target > 0 && r.Ratio < r.Variant.Target {
			fmt.Fprintf(out, "%s: %.2f of %s, below the %.1f target\n", r.Variant.Name, r.Ratio, r.Variant.Baseline, r.Variant.Target)
		}
		if r.Variant.AlsoTarget > 0 && r.AlsoRatio < r.Variant.AlsoTarget {
			fmt.Fprintf(out, "%s: %.2f of %s, below the %.1f target\n", r.Variant.Name, r.AlsoRatio, r.Variant.Also, r.Variant.AlsoTarget)
		}
	}
	return nil
}

// printAlso writes the ratio of each variant to its second baseline, with
// its spread over the rounds and its target.
func printAlso(out io.Writer, results []benchmarks.E2EResult) {
	for _, r := range results {
		if r.Variant.Also == "" {
			continue
		}
		t := ""
		if r.Variant.AlsoTarget > 0 {
			t = fmt.Sprintf(", target ≥ %.1f", r.Variant.AlsoTarget)
		}
		fmt.Fprintf(out, "%s vs %s: %.2f (per round %.2f–%.2f%s)\n", r.Variant.Name, r.Variant.Also, r.AlsoRatio, r.AlsoMinRatio, r.AlsoMaxRatio, t)
	}
}

// printOwnTx compares the transactional mode with the handler that writes
// in a transaction of its own: the case in which the claim rides in a
// commit the handler pays for anyway.
func printOwnTx(out io.Writer, results []benchmarks.E2EResult) {
	rates := map[string]float64{}
	for _, r := range results {
		rates[r.Variant.Name] = r.Rate()
	}
	tx, own := rates[benchmarks.E2EWriteTransactional], rates[benchmarks.E2EWriteOwnTx]
	if tx > 0 && own > 0 {
		fmt.Fprintf(out, "\n%s vs %s: %.2f\n", benchmarks.E2EWriteTransactional, benchmarks.E2EWriteOwnTx, tx/own)
	}
}

// printTelemetryCost reports what telemetry adds to each message: the
// time per message of each telemetry variant less its baseline's, which
// records through the global providers nobody set.
func printTelemetryCost(out io.Writer, results []benchmarks.E2EResult) {
	rates := map[string]float64{}
	for _, r := range results {
		rates[r.Variant.Name] = r.Rate()
	}
	for _, r := range results {
		base := rates[r.Variant.Baseline]
		if r.Variant.Telemetry == benchmarks.TelemetryGlobal || base <= 0 || r.Rate() <= 0 {
			continue
		}
		per, basePer := 1e6/r.Rate(), 1e6/base
		what := "with the SDK"
		if r.Variant.Telemetry == benchmarks.TelemetryNone {
			what, per, basePer = "on no provider", basePer, per
		}
		fmt.Fprintf(out, "telemetry %s: %+.1f µs per message, %s (%.1f µs vs %.1f µs)\n", what, per-basePer, r.Variant.Name, per, basePer)
	}
}

// e2eFigures gives each variant with a baseline its ratio to it, and to
// its Also.
func e2eFigures(results []benchmarks.E2EResult) []figure {
	rates := map[string]float64{}
	for _, r := range results {
		rates[r.Variant.Name] = r.Rate()
	}
	var figs []figure
	for _, r := range results {
		for _, vs := range []struct {
			name   string
			target float64
		}{{r.Variant.Baseline, r.Variant.Target}, {r.Variant.Also, r.Variant.AlsoTarget}} {
			if vs.name == "" {
				continue
			}
			var t target
			if vs.target > 0 {
				t = atLeast(vs.target)
			}
			figs = append(figs, figure{name: "consumer end to end, " + r.Variant.Name + " vs " + vs.name,
				value: r.Rate(), baseline: rates[vs.name], unit: "msg/s", target: t})
		}
	}
	return figs
}
