package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/internal/cli"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// The outbox's performance targets: forwarder throughput against Watermill's
// forwarder and in absolute terms, and commit-to-Kafka latency.
const (
	outboxRatioTarget = 10.0                  // × Watermill's forwarder
	outboxRateTarget  = 5000.0                // msg/s
	outboxP99Target   = 10 * time.Millisecond // with NOTIFY
)

func outboxCommand() command {
	return command{
		summary: "outbox forwarder vs Watermill's forwarder on watermill-sql: throughput, commit-to-Kafka latency",
		run:     runOutbox,
	}
}

// outboxFlags are the outbox subcommand's settings.
type outboxFlags struct {
	messages, watermill, rounds int
	latency                     int
	interval                    time.Duration
	brokers                     []string
}

func parseOutboxFlags(args []string, out io.Writer) (outboxFlags, error) {
	fs := cli.NewFlagSet("koto-bench outbox")
	messages := fs.Int("messages", 20000, "messages committed into the table per round, all forwarded by the outbox forwarder")
	watermill := fs.Int("watermill-messages", 2000, "of those, how many Watermill's forwarder forwards per round (it is slow)")
	rounds := fs.Int("rounds", 3, "throughput rounds")
	latency := fs.Int("latency-messages", 500, "messages per latency variant, one per transaction")
	interval := fs.Duration("interval", 5*time.Millisecond, "time between the latency variants' commits")
	brokers := brokersFlag(fs, "")
	if err := cli.Parse(fs, out, args); err != nil {
		return outboxFlags{}, err
	}
	f := outboxFlags{messages: *messages, watermill: *watermill, rounds: *rounds, latency: *latency, interval: *interval}
	if f.messages < 1 || f.watermill < 1 || f.watermill > f.messages || f.rounds < 1 || f.latency < 1 || f.interval <= 0 {
		return outboxFlags{}, cli.Usagef("-messages, -rounds, -latency-messages and -interval must be positive, " +
			"-watermill-messages between 1 and -messages")
	}
	f.brokers = brokers()
	return f, nil
}

func runOutbox(ctx context.Context, args []string, out io.Writer) error {
	f, err := parseOutboxFlags(args, out)
	if err != nil {
		return err
	}
	r, err := measureOutbox(ctx, f, out)
	if err != nil {
		return err
	}
	if err := printOutboxThroughput(out, r.throughput); err != nil {
		return err
	}
	fmt.Fprintf(out, "\ncommit-to-Kafka latency: %d messages per variant, one per transaction, one commit every %v (open loop);\n"+
		"from the return of the commit to the arrival at a Kafka consumer in this process\n\n", f.latency, f.interval)
	return printOutboxLatency(out, r.latency)
}

// outboxResult is what the outbox subcommand measures.
type outboxResult struct {
	throughput benchmarks.OutboxThroughput
	latency    []outboxLatencyRow // in the order of benchmarks.OutboxVariants
}

// measureOutbox runs the throughput rounds and the latency variants, and
// writes what it runs to out.
func measureOutbox(ctx context.Context, f outboxFlags, out io.Writer) (r outboxResult, err error) {
	err = withOutbox(ctx, f.brokers, "koto_bench_outbox", out, func(b *benchmarks.Outbox) error {
		r, err = measureOutboxOn(ctx, b, f, out)
		return err
	})
	return r, err
}

// withOutbox runs fn on an outbox benchmark in a schema named after
// prefix, on brokers (an embedded broker when empty), and says on out
// where it runs.
func withOutbox(ctx context.Context, brokers []string, prefix string, out io.Writer, fn func(b *benchmarks.Outbox) error) error {
	brokers, where, stopKafka, err := kafkaFor(ctx, brokers)
	if err != nil {
		return err
	}
	defer stopKafka()
	pool, cleanup, err := benchPool(ctx, 8)
	if err != nil {
		return err
	}
	defer cleanup()
	b, err := benchmarks.NewOutbox(ctx, brokers, pool, pgtest.Name(prefix))
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Fprintf(out, "outbox table %s on %s; producers with the broker package's settings (acks=all, idempotent)\n\n", b.Table(), where)
	return fn(b)
}

// measureOutboxOn measures the outbox figures on b.
func measureOutboxOn(ctx context.Context, b *benchmarks.Outbox, f outboxFlags, out io.Writer) (outboxResult, error) {
	var r outboxResult
	var err error
	if _, err := benchmarks.CompareOutbox(ctx, b, min(f.messages, 500), min(f.watermill, 50), 1); err != nil {
		return r, fmt.Errorf("warm-up: %w", err)
	}
	if r.throughput, err = benchmarks.CompareOutbox(ctx, b, f.messages, f.watermill, f.rounds); err != nil {
		return r, err
	}
	fmt.Fprintf(out, "throughput: %d rounds; each commits %d messages (%d per transaction, 16 partition keys) with no forwarder running,\n"+
		"then Watermill's forwarder forwards the first %d of them, then the outbox forwarder all %d, from the same rows\n\n",
		f.rounds, f.messages, 500, f.watermill, f.messages)
	for _, v := range benchmarks.OutboxVariants() {
		l, err := b.Latency(ctx, v, f.latency, f.interval)
		if err != nil {
			return r, err
		}
		r.latency = append(r.latency, outboxLatencyRow{v.Name, l})
	}
	return r, nil
}

// outboxFigures gives the forwarder's throughput against Watermill's and
// in absolute terms, and its latencies against Watermill's forwarder's
// (the last latency variant).
func outboxFigures(r outboxResult) []figure {
	figs := []figure{
		{name: "outbox forwarder throughput vs Watermill forwarder", value: r.throughput.KotoRate(),
			baseline: r.throughput.WatermillRate(), unit: "msg/s", target: atLeast(outboxRatioTarget)},
		{name: "outbox forwarder throughput", value: r.throughput.KotoRate(), unit: "msg/s",
			target: target{cmp: "≥", bound: outboxRateTarget, ofValue: true, unit: "msg/s"}},
	}
	if len(r.latency) < 2 {
		return figs
	}
	wm := r.latency[len(r.latency)-1]
	for i, row := range r.latency[:len(r.latency)-1] {
		figs = append(figs, figure{name: "commit-to-Kafka p50, " + row.name + " vs " + wm.name,
			value: ms(row.lat.P50), baseline: ms(wm.lat.P50), unit: "ms"})
		p99 := figure{name: "commit-to-Kafka p99, " + row.name + " vs " + wm.name,
			value: ms(row.lat.P99), baseline: ms(wm.lat.P99), unit: "ms"}
		if i == 0 {
			p99.target = target{cmp: "<", bound: ms(outboxP99Target), ofValue: true, unit: "ms"}
		}
		figs = append(figs, p99)
	}
	return figs
}

type outboxLatencyRow struct {
	name string
	lat  benchmarks.OutboxLatency
}

func printOutboxThroughput(out io.Writer, r benchmarks.OutboxThroughput) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "forwarder\tmessages\tseconds\tmsg/s\t× Watermill\ttarget\t")
	fmt.Fprintf(w, "Watermill forwarder on watermill-sql\t%d\t%.2f\t%.0f\tbaseline\t-\t\n", r.WatermillMessages, r.Watermill.Seconds(), r.WatermillRate())
	fmt.Fprintf(w, "outbox forwarder\t%d\t%.2f\t%.0f\t%.1f\t≥ %.0f×, ≥ %.0f msg/s\t\n",
		r.KotoMessages, r.Koto.Seconds(), r.KotoRate(), r.Ratio(), outboxRatioTarget, outboxRateTarget)
	if err := w.Flush(); err != nil {
		return err
	}
	if r.Ratio() < outboxRatioTarget || r.KotoRate() < outboxRateTarget {
		fmt.Fprintf(out, "below the target: %.1f× Watermill's forwarder, %.0f msg/s\n", r.Ratio(), r.KotoRate())
	}
	return nil
}

func printOutboxLatency(out io.Writer, rows []outboxLatencyRow) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "variant\tp50 ms\tp99 ms\tmax ms\ttarget\t")
	for i, r := range rows {
		target := "-"
		if i == 0 {
			target = fmt.Sprintf("p99 < %v", outboxP99Target)
		}
		fmt.Fprintf(w, "%s\t%.2f\t%.2f\t%.2f\t%s\t\n", r.name, ms(r.lat.P50), ms(r.lat.P99), ms(r.lat.Max), target)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(rows) > 0 && rows[0].lat.P99 >= outboxP99Target {
		fmt.Fprintf(out, "%s: p99 %.2f ms, above the target\n", rows[0].name, ms(rows[0].lat.P99))
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
