package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/internal/cli"
)

// The schedule's performance targets: lateness, and the rate at which the
// forwarder fires a schedule of messages all due at once.
const (
	lateP99Target  = 50 * time.Millisecond
	fireRateTarget = 10_000.0 // msg/s
)

func scheduleCommand() command {
	return command{
		summary: "scheduled messages: lateness (due time to Kafka), and fires/s when many are due at once vs a raw INSERT … SELECT",
		run:     runSchedule,
	}
}

// scheduleFlags are the schedule subcommand's settings.
type scheduleFlags struct {
	late    int
	spread  time.Duration
	due     int
	brokers []string
}

func parseScheduleFlags(args []string, out io.Writer) (scheduleFlags, error) {
	fs := cli.NewFlagSet("koto-bench schedule")
	late := fs.Int("lateness-messages", 5000, "messages scheduled for the lateness, due evenly over -spread")
	spread := fs.Duration("spread", 10*time.Second, "how long the lateness messages' due times span")
	due := fs.Int("due", 1_000_000, "messages scheduled and all due at once, for the fire rate")
	brokers := brokersFlag(fs, "")
	if err := cli.Parse(fs, out, args); err != nil {
		return scheduleFlags{}, err
	}
	f := scheduleFlags{late: *late, spread: *spread, due: *due}
	if f.late < 1 || f.spread <= 0 || f.due < 1 {
		return scheduleFlags{}, cli.Usagef("-lateness-messages, -spread and -due must be positive")
	}
	f.brokers = brokers()
	return f, nil
}

func runSchedule(ctx context.Context, args []string, out io.Writer) error {
	f, err := parseScheduleFlags(args, out)
	if err != nil {
		return err
	}
	r, err := measureSchedule(ctx, f, out)
	if err != nil {
		return err
	}
	return printSchedule(out, f, r)
}

// scheduleResult is what the schedule subcommand measures.
type scheduleResult struct {
	late benchmarks.ScheduleLateness
	fire benchmarks.FireResult
}

// measureSchedule measures the lateness, then the fire rate, and writes
// what it runs to out.
func measureSchedule(ctx context.Context, f scheduleFlags, out io.Writer) (r scheduleResult, err error) {
	err = withOutbox(ctx, f.brokers, "koto_bench_schedule", out, func(b *benchmarks.Outbox) error {
		if r.late, err = b.Lateness(ctx, f.late, f.spread); err != nil {
			return fmt.Errorf("lateness: %w", err)
		}
		if r.fire, err = b.Fire(ctx, f.due); err != nil {
			return fmt.Errorf("fire: %w", err)
		}
		return nil
	})
	return r, err
}

// scheduleFigures gives the lateness, and the fire rate against the raw
// INSERT … SELECT.
func scheduleFigures(r scheduleResult) []figure {
	return []figure{
		{name: "scheduled lateness p50, due to consumed", value: ms(r.late.Consumed.P50), unit: "ms"},
		{name: "scheduled lateness p99, due to consumed", value: ms(r.late.Consumed.P99), unit: "ms",
			target: target{cmp: "≤", bound: ms(lateP99Target), ofValue: true, unit: "ms"}},
		{name: fmt.Sprintf("scheduled fires, %d due at once, vs raw INSERT … SELECT of the rows", r.fire.Messages),
			value: r.fire.FireRate(), baseline: r.fire.RawRate(), unit: "msg/s"},
		{name: fmt.Sprintf("scheduled fires, %d due at once", r.fire.Messages), value: r.fire.FireRate(), unit: "msg/s",
			target: target{cmp: "≥", bound: fireRateTarget, ofValue: true, unit: "msg/s"}},
	}
}

func printSchedule(out io.Writer, f scheduleFlags, r scheduleResult) error {
	fmt.Fprintf(out, "lateness: %d messages due evenly over %v, each scheduled %v ahead, a forwarder running;\n"+
		"from the due time to the record's timestamp (its produce; Kafka keeps milliseconds) and to its arrival at a consumer in this process\n\n",
		f.late, f.spread, time.Second)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "lateness\tp50 ms\tp99 ms\tmax ms\ttarget\t")
	fmt.Fprintf(w, "due to produced\t%.2f\t%.2f\t%.2f\t-\t\n", ms(r.late.Produced.P50), ms(r.late.Produced.P99), ms(r.late.Produced.Max))
	fmt.Fprintf(w, "due to consumed\t%.2f\t%.2f\t%.2f\tp99 ≤ %v\t\n", ms(r.late.Consumed.P50), ms(r.late.Consumed.P99), ms(r.late.Consumed.Max), lateP99Target)
	if err := w.Flush(); err != nil {
		return err
	}
	fr := r.fire
	fmt.Fprintf(out, "\nfire: %d messages scheduled, all due, no forwarder running; the baseline is one INSERT … SELECT of the same rows into the outbox;\n"+
		"then a forwarder starts and moves them into the outbox (a batch of 1000 per statement) while it forwards them\n\n", fr.Messages)
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "what\tseconds\tmsg/s\ttarget\t")
	fmt.Fprintf(w, "raw INSERT … SELECT\t%.2f\t%.0f\tbaseline\t\n", fr.Raw.Seconds(), fr.RawRate())
	fmt.Fprintf(w, "forwarder: schedule empty\t%.2f\t%.0f\t≥ %.0f msg/s\t\n", fr.Fired.Seconds(), fr.FireRate(), fireRateTarget)
	fmt.Fprintf(w, "forwarder: all in Kafka\t%.2f\t%.0f\t-\t\n", fr.Forwarded.Seconds(), fr.ForwardRate())
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "scheduled table afterwards, vacuumed: %d rows, %d kB with its index\n", fr.Left, fr.Size/1024)
	if r.late.Consumed.P99 > lateP99Target || fr.FireRate() < fireRateTarget {
		fmt.Fprintf(out, "below the target: lateness p99 %.2f ms, %.0f fires/s\n", ms(r.late.Consumed.P99), fr.FireRate())
	}
	return nil
}
