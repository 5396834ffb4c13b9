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
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "koto-kafka:", err)
		os.Exit(1)
	}
}

// run starts the broker described by args, writes its address to stdout and
// blocks until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	b, err := embedded.Start(ctx, opts...)
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Fprintf(stdout, "Kafka broker listening on %s\n", strings.Join(b.Addrs(), ","))
	<-ctx.Done()
	fmt.Fprintln(stdout, "shutting down")
	return b.Close()
}

func parseFlags(args []string, stderr io.Writer) ([]embedded.Option, error) {
	fs := flag.NewFlagSet("koto-kafka", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", 9092, "TCP port on 127.0.0.1 (0 picks a free one)")
	dataDir := fs.String("data-dir", "", "directory that keeps topics, records and group offsets across restarts (empty: in memory)")
	partitions := fs.Int("partitions", broker.DefaultPartitions, "partitions of auto-created topics")
	topicList := fs.String("topics", "", "comma-separated topics to create at start")
	verbose := fs.Bool("v", false, "log every request the broker handles")
	if err := fs.Parse(args); err != nil {
		return nil, err
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
