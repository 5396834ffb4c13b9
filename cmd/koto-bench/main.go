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
//	cleanup   PostgreSQL store Cleanup: rows/s, p99 of concurrent marks while it runs vs without
//	concurrent  concurrent consumer vs raw pgx and one at a time (local and remote PostgreSQL, a 20 ms call), p99 latency
//	e2e       idempotent consumer end to end vs the same without idempotency
//	memory    idempotency.MemoryStore vs Watermill's map repository, new keys and duplicates
//	outbox    outbox forwarder vs Watermill's forwarder: throughput, commit-to-Kafka latency
//	reqreply  cqrs request/reply vs raw produce→consume round trip
//	store     PostgreSQL idempotency store vs raw pgx (check+mark)
//
// PostgreSQL comes from DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"testing"
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
		"cleanup":    cleanupCommand(),
		"concurrent": concurrentCommand(),
		"e2e":        e2eCommand(),
		"memory":     memoryCommand(),
		"outbox":     outboxCommand(),
		"reqreply":   reqreplyCommand(),
		"store":      storeCommand(),
	}
}

func main() {
	testing.Init() // registers -test.benchtime, which testing.Benchmark reads
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "koto-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	cmds := commands()
	if len(args) == 0 {
		return fmt.Errorf("name a subcommand\n%s", usage(cmds))
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		return fmt.Errorf("unknown subcommand %q\n%s", args[0], usage(cmds))
	}
	return cmd.run(ctx, args[1:], out)
}

func usage(cmds map[string]command) string {
	var b strings.Builder
	b.WriteString("usage: koto-bench <subcommand> [flags]\nsubcommands:\n")
	names := make([]string, 0, len(cmds))
	for name := range cmds {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(&b, "  %-10s %s\n", name, cmds[name].summary)
	}
	return b.String()
}
