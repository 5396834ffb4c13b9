// Command koto-kafka runs the embedded Kafka-protocol broker of
// broker/embedded until SIGINT or SIGTERM, for local development:
//
//	go run ./cmd/koto-kafka -port 9092 -data-dir ./data -partitions 3
//
// It prints the broker address, which services use as KAFKA_BROKERS. With
// -data-dir, topics, records and committed consumer-group offsets survive a
// restart.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(cli.ExitCode(run(ctx, os.Args[1:], os.Stdout, os.Stderr), "koto-kafka", os.Stderr))
}

// run starts the broker described by args, writes its address to stdout and
// blocks until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, err := parseFlags(args, stdout, stderr)
	if err != nil {
		return err
	}
	b, err := embedded.Start(ctx, opts...)
	if errors.Is(err, embedded.ErrInvalidConfig) {
		return cli.Usagef("%v", err) // a flag's value
	}
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Fprintf(stdout, "Kafka broker listening on %s\n", strings.Join(b.Addrs(), ","))
	<-ctx.Done()
	fmt.Fprintln(stdout, "shutting down")
	return b.Close()
}

// parseFlags returns the broker's options; -h prints the usage on stdout,
// and the broker logs on stderr.
func parseFlags(args []string, stdout, stderr io.Writer) ([]embedded.Option, error) {
	fs := flag.NewFlagSet("koto-kafka", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: koto-kafka [flags]\n  runs an embedded Kafka-protocol broker until interrupted\nflags:")
		fs.PrintDefaults()
	}
	port := fs.Int("port", 9092, "TCP port on 127.0.0.1 (0 picks a free one)")
	dataDir := fs.String("data-dir", "", "directory that keeps topics, records and group offsets across restarts (empty: in memory)")
	partitions := fs.Int("partitions", broker.DefaultPartitions, "partitions of auto-created topics")
	topicList := fs.String("topics", "", "comma-separated topics to create at start")
	verbose := fs.Bool("v", false, "log every request the broker handles")
	if err := cli.Parse(fs, stdout, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("takes no arguments, got %q", fs.Args())
	}
	opts := []embedded.Option{embedded.WithPort(*port), embedded.WithPartitions(*partitions)}
	if *dataDir != "" {
		opts = append(opts, embedded.WithDataDir(*dataDir))
	}
	if *topicList != "" {
		opts = append(opts, embedded.WithTopics(strings.Split(*topicList, ",")...))
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	return append(opts, embedded.WithLogger(logger)), nil
}
