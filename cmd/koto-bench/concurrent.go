package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

func concurrentCommand() command {
	return command{
		summary: "concurrent consumer (many messages of a partition in flight, each key in order) vs raw pgx and one at a time",
		run:     runConcurrent,
	}
}

// remoteDelay is how far the proxy puts PostgreSQL, each way.
const remoteDelay = time.Millisecond

// concurrentFlags are the concurrent subcommand's settings.
type concurrentFlags struct {
	messages, latency, rounds int
	brokers                   []string
}

// concurrentResult is what the concurrent subcommand measures: the three
// groups of variants, and the latencies at a fixed offered load.
type concurrentResult struct {
	local, remote, waiting []benchmarks.E2EResult
	latency                []benchmarks.LatencyResult // one at a time, then concurrent
	cpu                    map[string]benchmarks.CPU  // by variant
}

func runConcurrent(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("concurrent", flag.ContinueOnError)
	messages := fs.Int("messages", 3000, "messages per run (the 20 ms variants have their own)")
	latency := fs.Int("latency", 3000, "messages of each latency run")
	rounds := fs.Int("rounds", 3, "rounds; each runs every variant of a group, in an order rotated by one per round")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	brokers := brokersFlag(fs, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *profile != "" {
		stop, err := startCPUProfile(*profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	f := concurrentFlags{messages: *messages, latency: *latency, rounds: *rounds, brokers: brokers()}
	if f.messages < 1 || f.latency < 1 || f.rounds < 1 {
		return fmt.Errorf("-messages, -latency and -rounds must be at least 1")
	}
	r, err := measureConcurrent(ctx, f, out)
	if err != nil {
		return err
	}
	for _, group := range [][]benchmarks.E2EResult{r.local, r.remote, r.waiting} {
		if err := printE2E(out, group); err != nil {
			return err
		}
		fmt.Fprintln(out)
		if err := printCPU(out, group, r.cpu); err != nil {
			return err
		}
		fmt.Fprintln(out)
	}
	for _, l := range r.latency {
		fmt.Fprintf(out, "%s at %.0f msg/s: p50 %v, p99 %v\n", l.Variant.Name, l.Rate, l.P50, l.P99)
	}
	return nil
}

// measureConcurrent runs the three groups of E2EConcurrentVariants, each in
// a comparison of its own: on the local database, with PostgreSQL a hop
// away, and with the handler waiting on an outside call; then the latency
// of the transactional consumer, one at a time and concurrent, at half
// the one-at-a-time capacity measured in the first group.
func measureConcurrent(ctx context.Context, f concurrentFlags, out io.Writer) (concurrentResult, error) {
	var r concurrentResult
	conns := int32(benchmarks.ConcurrentLocal + 4)
	b, err := newE2EBench(ctx, f.brokers, conns, "koto_bench_conc")
	if err != nil {
		return r, err
	}
	defer b.stop()
	e, pool := b.E2E, b.pool
	fmt.Fprintf(out, "%d messages per run on %s, %d partitions, %d keys, router → middleware.Defaults → handler;\n"+
		"PostgreSQL pools of %d connections; %d rounds per group\n\n", f.messages, b.where, benchmarks.E2EPartitions, benchmarks.E2EKeys, conns, f.rounds)

	local, remote, waiting := concurrentGroups()
	if r.local, err = compareGroup(ctx, e, local, f.messages, f.rounds); err != nil {
		return r, err
	}
	if r.latency, err = measureLatency(ctx, e, r.local, f.latency, f.rounds); err != nil {
		return r, err
	}
	pool.Reset() // its connections, idle from now on, make room for the remote pool's
	stopRemote, err := setRemote(ctx, e, conns)
	if err != nil {
		return r, err
	}
	defer stopRemote()
	if r.remote, err = compareGroup(ctx, e, remote, f.messages, f.rounds); err != nil {
		return r, err
	}
	r.waiting, err = compareGroup(ctx, e, waiting, f.messages, f.rounds)
	r.cpu = map[string]benchmarks.CPU{}
	for _, v := range benchmarks.E2EConcurrentVariants() {
		r.cpu[v.Name] = e.CPU(v.Name)
	}
	return r, err
}

// concurrentGroups splits E2EConcurrentVariants: local database, remote,
// and waiting on an outside call.
func concurrentGroups() (local, remote, waiting []benchmarks.E2EVariant) {
	for _, v := range benchmarks.E2EConcurrentVariants() {
		switch {
		case v.Remote:
			remote = append(remote, v)
		case v.Wait > 0:
			waiting = append(waiting, v)
		default:
			local = append(local, v)
		}
	}
	return local, remote, waiting
}

// compareGroup warms variants up, then compares them; their CPU is that
// of the comparison alone.
func compareGroup(ctx context.Context, e *benchmarks.E2E, variants []benchmarks.E2EVariant, messages, rounds int) ([]benchmarks.E2EResult, error) {
	if err := warmUp(ctx, e.Run, variants, messages); err != nil {
		return nil, err
	}
	e.ResetCPU(variants)
	return benchmarks.CompareE2E(ctx, e.Run, variants, messages, rounds)
}

// measureLatency runs the transactional consumer, one at a time and
// concurrent, at half the one-at-a-time rate that local measured, rounds
// times each, alternating, and gives the quantiles of each one's runs
// together.
func measureLatency(ctx context.Context, e *benchmarks.E2E, local []benchmarks.E2EResult, n, rounds int) ([]benchmarks.LatencyResult, error) {
	var oneAtATime, concurrent benchmarks.E2EVariant
	var capacity float64
	for _, r := range local {
		switch r.Variant.Name {
		case benchmarks.E2EWriteTransactional:
			oneAtATime, capacity = r.Variant, r.Rate()
		case benchmarks.E2EConcWriteTx:
			concurrent = r.Variant
		}
	}
	if capacity <= 0 || concurrent.Name == "" {
		return nil, fmt.Errorf("latency: the transactional variants were not measured")
	}
	pair := []benchmarks.E2EVariant{oneAtATime, concurrent}
	out := make([]benchmarks.LatencyResult, len(pair))
	for round := range rounds {
		for j := range pair {
			i := (j + round) % len(pair)
			l, err := e.Latency(ctx, pair[i], capacity/2, n)
			if err != nil {
				return nil, fmt.Errorf("latency of %s: %w", pair[i].Name, err)
			}
			out[i] = out[i].Add(l)
		}
	}
	return out, nil
}

// setRemote gives e a pool of conns connections through a proxy that
// delays each way by remoteDelay, and returns what closes both.
func setRemote(ctx context.Context, e *benchmarks.E2E, conns int32) (stop func(), err error) {
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		return nil, err
	}
	proxy, err := pgtest.StartProxy(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	if err != nil {
		return nil, err
	}
	proxy.SetDelay(remoteDelay)
	host, port, _ := net.SplitHostPort(proxy.Addr())
	p, _ := strconv.ParseUint(port, 10, 16)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	cfg.MaxConns = conns
	cfg.ConnConfig.RuntimeParams["application_name"] = benchmarks.ApplicationName
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = e.SetRemote(pool)
	}
	if err != nil {
		_ = proxy.Close()
		return nil, err
	}
	return func() { pool.Close(); _ = proxy.Close() }, nil
}

// printCPU writes where each variant's CPU went, per message: this
// process (Kafka's embedded broker included, when there is one), the
// PostgreSQL backends serving it, and how busy the machine was meanwhile,
// from each run's first message to its last.
func printCPU(out io.Writer, results []benchmarks.E2EResult, cpu map[string]benchmarks.CPU) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "variant\tCPU µs/msg: this process\tPostgreSQL\tmachine busy\t")
	for _, r := range results {
		c := cpu[r.Variant.Name]
		if r.Messages == 0 || c.Cores == 0 {
			continue
		}
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(r.Messages) }
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.0f %%\t\n", r.Variant.Name, per(c.Self), per(c.Postgres),
			100*float64(c.Busy)/float64(c.Cores))
	}
	return w.Flush()
}

// concurrentFigures gives each variant with a baseline its ratio to it,
// and the concurrent consumer's p99 latency against one at a time's.
func concurrentFigures(r concurrentResult) []figure {
	var figs []figure
	for _, group := range [][]benchmarks.E2EResult{r.local, r.remote, r.waiting} {
		for _, f := range e2eFigures(group) {
			f.name = "concurrent consumption, " + f.name[len("consumer end to end, "):]
			figs = append(figs, f)
		}
	}
	if len(r.latency) == 2 {
		one, conc := r.latency[0], r.latency[1]
		figs = append(figs, figure{
			name:  fmt.Sprintf("concurrent consumption, p99 latency at %.0f msg/s (half of one at a time's), %s vs %s", one.Rate, conc.Variant.Name, one.Variant.Name),
			value: ms(conc.P99), baseline: ms(one.P99), unit: "ms", target: atMost(1),
		})
	}
	return figs
}
