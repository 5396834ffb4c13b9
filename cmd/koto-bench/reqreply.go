package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/internal/cli"
)

// reqreplyHopsGuard bounds request/reply over two raw hops back to back,
// the floor of any request/reply on these clients: a guard against
// regression, not a goal (see reqreplyGuardNote).
const reqreplyHopsGuard = 1.25

// reqreplyGuardNote says why request/reply has a guard and no target.
const reqreplyGuardNote = "the guard catches a regression; it is not a goal: the CPU request/reply adds, about 40 µs a request, " +
	"is under 2 % of a round trip between hosts. Against one raw hop the figure is shown, without a target."

func reqreplyCommand() command {
	return command{
		summary: "cqrs request/reply round trip vs raw produce→consume and two raw hops on one broker (guard ≤ 1.25× two hops)",
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

// reqreplyFigures gives the request/reply median against a raw round trip,
// shown, and against two raw hops, under a guard.
func reqreplyFigures(r benchmarks.ReqReplyResult) []figure {
	return []figure{
		{name: "request/reply median vs raw produce→consume", value: µs(r.Reply.Median), baseline: µs(r.Raw.Median), unit: "µs"},
		{name: "request/reply median vs two raw hops", value: µs(r.Reply.Median), baseline: µs(r.PingPong.Median),
			unit: "µs", target: guardAtMost(reqreplyHopsGuard), note: reqreplyGuardNote},
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
	fmt.Fprintf(out, "\nrequest/reply %.0f µs: %.2f× raw (%.0f µs), shown; %.2f× two raw hops (%.0f µs), guard ≤ %.2f×\n",
		µs(r.Reply.Median), r.ReplyRatio, µs(r.Raw.Median), r.ReplyHopsRatio, µs(r.PingPong.Median), reqreplyHopsGuard)
	fmt.Fprintln(out, reqreplyGuardNote)
	if r.ReplyHopsRatio > reqreplyHopsGuard {
		fmt.Fprintf(out, "above the guard: request/reply costs more than it did; compare with the previous commit (docs/benchmarks.md)\n")
	}
	return nil
}

func µs(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
