// Command koto-kafka runs the embedded Kafka-protocol broker of
// broker/embedded until SIGINT or SIGTERM, for local development:
//
//	go run ./cmd/koto-kafka -port 9092 -data-dir ./data -partitions 3
//
// It prints the broker address, which services use as KAFKA_BROKERS. With
// -data-dir, topics, records and committed consumer-group offsets survive a
// restart.
//
// To try a client configured as for a secured cluster (a .NET service on
// Confluent.Kafka, kcat), run it with TLS and SASL users:
//
//	go run ./cmd/koto-kafka -tls-cert broker.crt -tls-key broker.key \
//		-sasl-user SCRAM-SHA-512:koto:secret -sasl-user PLAIN:admin:admin
//
// Clients then connect with security.protocol=SASL_SSL and trust
// broker.crt (librdkafka: ssl.ca.location). -sasl-user alone gives
// SASL_PLAINTEXT, -tls-cert and -tls-key alone give SSL.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	koto "github.com/koto-dev/watermill-koto"

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
	if errors.Is(err, koto.ErrInvalidConfig) {
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
	certFile := fs.String("tls-cert", "", "PEM certificate file: accept only TLS connections (needs -tls-key)")
	keyFile := fs.String("tls-key", "", "PEM private key file of -tls-cert")
	var users saslUsers
	fs.Var(&users, "sasl-user", "mechanism:user:password that clients authenticate as; mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable)")
	if err := cli.Parse(fs, stdout, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("takes no arguments, got %q", fs.Args())
	}
	opts := []embedded.Option{embedded.WithPort(*port), embedded.WithPartitions(*partitions)}
	tlsOpt, err := tlsOption(*certFile, *keyFile)
	if err != nil {
		return nil, err
	}
	if tlsOpt != nil {
		opts = append(opts, tlsOpt)
	}
	opts = append(opts, users...)
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

// tlsOption loads the broker's certificate, or returns nil when neither file
// is given.
func tlsOption(certFile, keyFile string) (embedded.Option, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("-tls-cert and -tls-key go together: give both PEM files, or neither for a plaintext broker")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("-tls-cert/-tls-key: %w", err)
	}
	return embedded.WithTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), nil
}

// saslUsers collects the -sasl-user flags.
type saslUsers []embedded.Option

func (u *saslUsers) String() string { return "" }

// Set parses mechanism:user:password; the password may contain colons.
func (u *saslUsers) Set(v string) error {
	parts := strings.SplitN(v, ":", 3)
	if len(parts) != 3 {
		return errors.New("want mechanism:user:password, such as SCRAM-SHA-512:koto:secret")
	}
	*u = append(*u, embedded.WithSASLUser(strings.ToUpper(parts[0]), parts[1], parts[2]))
	return nil
}
