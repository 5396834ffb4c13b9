package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/koto-dev/watermill-koto/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/internal/cli"
)

// reqreplyTarget is the most that request/reply may take: a round trip
// within 2× a raw produce→consume round trip.
const reqreplyTarget = 2.0

// reqreplyHopsTarget is the most that request/reply may take over two raw
// hops back to back, the floor of any request/reply on these clients.
const reqreplyHopsTarget = 1.1

func reqreplyCommand() command {
	return command{
		summary: "cqrs request/reply round trip vs raw produce→consume on one broker (target ≤ 2×)",
		run:     runReqReply,
	}
}

// reqreplyFlags are the reqreply subcommand's settings.
type reqreplyFlags struct {
	rounds, warmup, size int
	brokers              []string
}

func parseReqReplyFlags(args []string, out io.Writer) (reqreplyFlags, error) {
	fs := cli.NewFlagSet("koto-bench reqreply")
	rounds := fs.Int("rounds", 2000, "measured rounds; each runs one raw round trip, one ping-pong and one request")
	warmup := fs.Int("warmup", 200, "rounds run before measuring")
	size := fs.Int("size", 100, "payload size in bytes")
	brokers := brokersFlag(fs, "")
	if err := cli.Parse(fs, out, args); err != nil {
		return reqreplyFlags{}, err
	}
	f := reqreplyFlags{rounds: *rounds, warmup: *warmup, size: *size}
	if f.rounds < 1 || f.warmup < 0 || f.size < 0 {
		return reqreplyFlags{}, cli.Usagef("-rounds must be at least 1, -warmup and -size not negative")
	}
	f.brokers = brokers()
	return f, nil
}

func runReqReply(ctx context.Context, args []string, out io.Writer) error {
	f, err := parseReqReplyFlags(args, out)
	if err != nil {
		return err
	}
	res, err := measureReqReply(ctx, f, out)
	if err != nil {
		return err
	}
	return printReqReply(out, res)
}

// measureReqReply runs the round trips and writes what it runs to out.
func measureReqReply(ctx context.Context, f reqreplyFlags, out io.Writer) (benchmarks.ReqReplyResult, error) {
	brokers, where, stopKafka, err := kafkaFor(ctx, f.brokers)
	if err != nil {
		return benchmarks.ReqReplyResult{}, err
	}
	defer stopKafka()
	f.brokers = brokers
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	rr, err := benchmarks.NewReqReply(ctx, f.brokers, "koto-bench-"+hex.EncodeToString(suffix[:]), f.size)
	if err != nil {
		return benchmarks.ReqReplyResult{}, err
	}
	defer rr.Close()

	fmt.Fprintf(out, "sequential round trips of %d-byte payloads on %s, %d rounds after %d warm-up rounds;\n"+
		"each round runs one of each kind, so all see the same machine noise\n\n", f.size, where, f.rounds, f.warmup)
	return benchmarks.MeasureReqReply(ctx, rr, f.warmup, f.rounds)
}

// reqreplyFigures gives the request/reply median against a raw round trip
// and against two raw hops.
func reqreplyFigures(r benchmarks.ReqReplyResult) []figure {
	return []figure{
		{name: "request/reply median vs raw produce→consume", value: µs(r.Reply.Median), baseline: µs(r.Raw.Median),
			unit: "µs", target: atMost(reqreplyTarget)},
		{name: "request/reply median vs two raw hops", value: µs(r.Reply.Median), baseline: µs(r.PingPong.Median),
			unit: "µs", target: atMost(reqreplyHopsTarget)},
	}
}

func printReqReply(out io.Writer, r benchmarks.ReqReplyResult) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "round trip\tmedian µs\tmean µs\tp90 µs\t× raw\t")
	row := func(name string, l benchmarks.Latency) {
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.0f\t%.2f\t\n", name, µs(l.Median), µs(l.Mean), µs(l.P90), float64(l.Median)/float64(r.Raw.Median))
	}
	row("raw produce→consume", r.Raw)
	row("ping-pong (2 raw hops)", r.PingPong)
	row("request/reply (cqrs)", r.Reply)
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nraw %.0f µs, request/reply %.0f µs, ratio %.2f (target ≤ %.1f)\n", µs(r.Raw.Median), µs(r.Reply.Median), r.ReplyRatio, reqreplyTarget)
	if r.ReplyRatio > reqreplyTarget {
		fmt.Fprintf(out, "above the target; two raw hops alone take %.2f×\n", r.PingPongRatio)
	}
	return nil
}

func µs(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
