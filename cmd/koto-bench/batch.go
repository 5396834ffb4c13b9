package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/internal/cli"
)

func batchCommand() command {
	return command{
		summary: "batch handlers (many messages per transaction, each key in order) vs per-message concurrent consumers and raw pgx batches, p99 at half capacity",
		run:     runBatch,
	}
}

// batchLatencySlack is how much longer than the flush time the p99 from a
// record's produce to its batch's commit may be.
const batchLatencySlack = 20 * time.Millisecond

// batchFlags are the batch subcommand's settings.
type batchFlags struct {
	messages, batchMessages, rounds int
	latency                         time.Duration // of each latency run, at the offered load
	brokers                         []string
}

// batchResult is what the batch subcommand measures: the variants, and
// the transactional batch consumer's latency at half its capacity.
type batchResult struct {
	results []benchmarks.E2EResult
	latency benchmarks.LatencyResult
	cpu     map[string]benchmarks.CPU // by variant
}

func parseBatchFlags(args []string, out io.Writer) (batchFlags, string, error) {
	fs := cli.NewFlagSet("koto-bench batch")
	messages := fs.Int("messages", 3000, "messages per run of the per-message variants")
	batchMessages := fs.Int("batch-messages", 30000, "messages per run of the batch variants and of raw pgx's batches")
	latency := fs.Duration("latency", 2*time.Second, "length of each latency run at half the batch consumer's capacity")
	rounds := fs.Int("rounds", 3, "rounds; each runs every variant, in an order rotated by one per round, then the latency")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	brokers := brokersFlag(fs, "")
	if err := cli.Parse(fs, out, args); err != nil {
		return batchFlags{}, "", err
	}
	f := batchFlags{messages: *messages, batchMessages: *batchMessages, latency: *latency, rounds: *rounds, brokers: brokers()}
	if f.messages < 1 || f.batchMessages < 1 || f.rounds < 1 || f.latency <= 0 {
		return batchFlags{}, "", cli.Usagef("-messages, -batch-messages and -rounds must be at least 1, -latency positive")
	}
	return f, *profile, nil
}

func runBatch(ctx context.Context, args []string, out io.Writer) error {
	f, profile, err := parseBatchFlags(args, out)
	if err != nil {
		return err
	}
	if profile != "" {
		stop, err := startCPUProfile(profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	r, err := measureBatch(ctx, f, out)
	if err != nil {
		return err
	}
	return printBatch(out, r)
}

func printBatch(out io.Writer, r batchResult) error {
	if err := printE2E(out, r.results); err != nil {
		return err
	}
	fmt.Fprintln(out)
	if err := printCPU(out, r.results, r.cpu); err != nil {
		return err
	}
	l := r.latency
	fmt.Fprintf(out, "\n%s at %.0f msg/s (half its capacity), produce to commit: p50 %v, p99 %v (flush time %v; target ≤ %v)\n",
		l.Variant.Name, l.Rate, l.P50, l.P99, benchmarks.BatchMaxWait(), benchmarks.BatchMaxWait()+batchLatencySlack)
	if c := l.CPU; l.Messages > 0 && c.Cores > 0 {
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(l.Messages) }
		fmt.Fprintf(out, "meanwhile, CPU µs/msg: this process (producer included) %.0f, PostgreSQL %.0f; machine busy %.0f %%\n",
			per(c.Self), per(c.Postgres), 100*float64(c.Busy)/float64(c.Cores))
	}
	return nil
}

// measureBatch compares E2EBatchVariants, the batch variants with
// f.batchMessages per run, then runs the transactional batch consumer
// f.rounds times at half the rate it reached, from a producer, and
// measures each message from its produce to its batch's commit.
func measureBatch(ctx context.Context, f batchFlags, out io.Writer) (batchResult, error) {
	var r batchResult
	conns := int32(benchmarks.ConcurrentLocal + 4)
	b, err := newE2EBench(ctx, f.brokers, conns, "koto_bench_batch")
	if err != nil {
		return r, err
	}
	defer b.stop()
	e := b.E2E
	fmt.Fprintf(out, "%d messages per per-message run, %d per batch run, on %s, %d partitions, %d keys (or one);\n"+
		"batches of up to %d, %d at once; PostgreSQL pool of %d connections; %d rounds\n\n",
		f.messages, f.batchMessages, b.where, benchmarks.E2EPartitions, benchmarks.E2EKeys,
		benchmarks.BatchSize, benchmarks.BatchParallel, conns, f.rounds)

	variants := benchmarks.E2EBatchVariants()
	for i := range variants {
		if variants[i].Batch > 0 {
			variants[i].Messages = f.batchMessages
		}
	}
	if r.results, err = compareGroup(ctx, e, variants, f.messages, f.rounds); err != nil {
		return r, err
	}
	r.cpu = map[string]benchmarks.CPU{}
	for _, v := range variants {
		r.cpu[v.Name] = e.CPU(v.Name)
	}
	r.latency, err = batchLatency(ctx, e, r.results, f)
	return r, err
}

// batchLatency runs the transactional batch consumer at half the rate it
// reached in results, f.rounds times, and gives the quantiles of its runs
// together.
func batchLatency(ctx context.Context, e *benchmarks.E2E, results []benchmarks.E2EResult, f batchFlags) (benchmarks.LatencyResult, error) {
	var out benchmarks.LatencyResult
	for _, r := range results {
		if r.Variant.Name != benchmarks.E2EBatchWriteTx || r.Rate() <= 0 {
			continue
		}
		rate := r.Rate() / 2
		n := max(int(rate*f.latency.Seconds()), 1)
		for round := range f.rounds {
			l, err := e.Latency(ctx, r.Variant, rate, n)
			if err != nil {
				return out, fmt.Errorf("latency of %s, round %d: %w", r.Variant.Name, round+1, err)
			}
			out = out.Add(l)
		}
		return out, nil
	}
	return out, fmt.Errorf("latency: %s was not measured", benchmarks.E2EBatchWriteTx)
}

// batchFigures gives each batch variant with a baseline its ratios, and
// the batch consumer's p99 latency against its flush time.
func batchFigures(r batchResult) []figure {
	var figs []figure
	for _, f := range e2eFigures(r.results) {
		f.name = "batch consumption, " + f.name[len("consumer end to end, "):]
		figs = append(figs, f)
	}
	if l := r.latency; l.Messages > 0 {
		bound := benchmarks.BatchMaxWait() + batchLatencySlack
		figs = append(figs, figure{
			name: fmt.Sprintf("batch consumption, p99 produce to commit at %.0f msg/s (half its capacity), %s, flush time %v",
				l.Rate, l.Variant.Name, benchmarks.BatchMaxWait()),
			value: ms(l.P99), unit: "ms", target: target{cmp: "≤", bound: ms(bound), ofValue: true, unit: "ms"},
		})
	}
	return figs
}
