// Command koto-bench runs watermill-koto's comparative benchmarks and prints
// their ratios. Each subcommand measures the project's code beside a
// baseline in the same run on the same machine, since only the ratio means
// anything on a shared machine.
//
// Usage:
//
//	go run ./cmd/koto-bench <subcommand> [flags]
//
// Subcommands:
//
//	all       every figure below, one line each, with its target and verdict (-quick: small sizes)
//	allocs    allocations and bytes per message on the consumer path, with and without the chain
//	batch     batch handlers vs per-message concurrent consumers and raw pgx batches (a hot key too), p99 at half capacity
//	cleanup   PostgreSQL store Cleanup: rows/s, p99 of concurrent marks while it runs vs without
//	concurrent  concurrent consumer vs raw pgx and one at a time (local and remote PostgreSQL, a 20 ms call), p99 latency
//	e2e       idempotent consumer end to end vs the same without idempotency
//	memory    idempotency.MemoryStore vs Watermill's map repository, new keys and duplicates
//	outbox    outbox forwarder vs Watermill's forwarder: throughput, commit-to-Kafka latency
//	reqreply  cqrs request/reply vs raw produce→consume round trip
//	schedule  scheduled messages: lateness, and fires/s when a million are due at once vs a raw INSERT … SELECT
//	store     PostgreSQL idempotency store vs raw pgx (check+mark)
//
// PostgreSQL comes from DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"testing"

	"github.com/koto-dev/watermill-koto/internal/cli"
)

// command is one subcommand: what it measures and how to run it with its
// arguments (the ones after its name).
type command struct {
	summary string
	run     func(ctx context.Context, args []string, out io.Writer) error
}

// commands lists the subcommands. Each lives in its own file.
func commands() map[string]command {
	return map[string]command{
		"all":        allCommand(),
		"allocs":     allocsCommand(),
		"batch":      batchCommand(),
		"cleanup":    cleanupCommand(),
		"concurrent": concurrentCommand(),
		"e2e":        e2eCommand(),
		"memory":     memoryCommand(),
		"outbox":     outboxCommand(),
		"reqreply":   reqreplyCommand(),
		"schedule":   scheduleCommand(),
		"store":      storeCommand(),
	}
}

func main() {
	testing.Init() // registers -test.benchtime, which testing.Benchmark reads
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(cli.ExitCode(run(ctx, os.Args[1:], os.Stdout), "koto-bench", os.Stderr))
}

// run runs the subcommand that args name; -h prints the usage on out.
func run(ctx context.Context, args []string, out io.Writer) error {
	cmds := commands()
	names := strings.Join(slices.Sorted(maps.Keys(cmds)), ", ")
	switch {
	case len(args) == 0:
		return cli.Usagef("no subcommand given; subcommands: %s", names)
	case cli.IsHelp(args[0]):
		fmt.Fprint(out, usage(cmds))
		return flag.ErrHelp
	case strings.HasPrefix(args[0], "-"):
		return cli.Usagef("flag provided but not defined: %s (flags come after the subcommand)", args[0])
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		return cli.Usagef("unknown subcommand %q; subcommands: %s", args[0], names)
	}
	return cli.In("koto-bench "+args[0], cmd.run(ctx, args[1:], out))
}

func usage(cmds map[string]command) string {
	var b strings.Builder
	b.WriteString("usage: koto-bench <subcommand> [flags]\nsubcommands:\n")
	for _, name := range slices.Sorted(maps.Keys(cmds)) {
		fmt.Fprintf(&b, "  %-10s %s\n", name, cmds[name].summary)
	}
	b.WriteString("'koto-bench <subcommand> -h' lists its flags.\n")
	return b.String()
}
