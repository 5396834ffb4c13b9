// Command shop runs three services that talk through Kafka, in one process:
// orders reserves stock from inventory by request/reply, then writes the
// order row and its OrderPlaced in one transaction through the durable
// outbox; payments consumes it in the transactional mode, where the claim
// of the message, its ledger row and its PaymentProcessed commit together;
// orders consumes that. The outbox's forwarder takes the committed events
// to Kafka. Each order is placed twice to show that it is charged once, and
// one malformed message goes to the dead-letter topic with its reason.
// Checkout also schedules the order's PaymentTimedOut, which its payment
// cancels in the transaction that records it. The card gateway is too
// busy for the second order's first charge and asks to be tried again in
// a second: the message is parked that long, its partition moving on and
// the order's next event waiting behind it, and is charged when it comes
// back.
//
//	go run ./examples/shop
//
// Kafka is an embedded broker unless KAFKA_BROKERS=host:port,... names a
// cluster. PostgreSQL is DATABASE_URL, by default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable; the example
// keeps its tables (orders, ledger, outbox, processed and parked messages)
// in the schema "shop_example".
//
// The shop ends by saying how to look at it in the operations console
// (koto console); with -keep-running the broker and the services keep
// running until interrupted, so that the console can show them: the
// consumers' lag, the dead letter and the outbox.
//
// With -metrics :9464 the services' OpenTelemetry metrics, the outbox's
// backlog included, are served in Prometheus's format on
// http://localhost:9464/metrics, until interrupted;
// with -trace the trace of the first order is printed when the demo ends:
// one checkout, one trace across the three services and the outbox, a line
// per span under its parent, with its service and duration; with -v as
// well, the spans follow in OpenTelemetry's stdout exporter's JSON.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
)

func main() {
	orders := flag.Int("orders", 3, "how many orders to place")
	verbose := flag.Bool("v", false, "log every message (debug level)")
	metrics := flag.String("metrics", "", "serve Prometheus metrics on this address (e.g. :9464) until interrupted")
	trace := flag.Bool("trace", false, "print the trace of the first order, a line per span (with -v, also the spans in OpenTelemetry's JSON)")
	keepRunning := flag.Bool("keep-running", false, "keep the broker and the services running until interrupted, for koto console")
	flag.Parse()

	opts := options{orders: *orders, schema: "shop_example", log: logger(*verbose), keepRunning: *keepRunning}
	if *metrics != "" {
		ln, err := net.Listen("tcp", *metrics)
		if err != nil {
			fmt.Fprintln(os.Stderr, "shop: -metrics:", err)
			os.Exit(2)
		}
		opts.metrics = ln
	}
	if *trace {
		opts.trace, opts.traceJSON = os.Stdout, *verbose
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "shop:", err)
		os.Exit(1)
	}
}

func logger(verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// options are what main takes from its flags.
type options struct {
	orders    int          // how many orders to place
	schema    string       // the PostgreSQL schema of the example's tables
	log       *slog.Logger // where the services log
	metrics   net.Listener // where to serve Prometheus metrics; nil: nowhere
	trace     io.Writer    // where to print the first order's trace; nil: nowhere
	traceJSON bool         // print its spans in the stdout exporter's JSON too
	out       io.Writer    // where the shop says what it did; nil: stdout
	// keepRunning keeps everything running until interrupted.
	keepRunning bool
	// router runs the services; nil: a router of the shop's own, which it
	// runs and stops.
	router *message.Router
}

// stdout is where the shop says what it did.
func (o options) stdout() io.Writer { return cmp.Or[io.Writer](o.out, os.Stdout) }

func run(ctx context.Context, opts options) error {
	out := opts.stdout()
	brokers, closeKafka, err := kafkaBrokers(ctx, out)
	if err != nil {
		return err
	}
	defer closeKafka()

	pool, err := postgresPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()

	obs, err := newObservability(opts)
	if err != nil {
		return err
	}
	defer obs.Close()
	shop, err := newShop(ctx, brokers, pool, opts, obs)
	if err != nil {
		return err
	}
	defer shop.Close()
	if err := shop.demo(ctx, opts.orders); err != nil {
		return err
	}
	consoleHint(out, brokers, opts)
	if opts.metrics != nil || opts.keepRunning {
		fmt.Fprintln(out, "running until interrupted")
		<-ctx.Done()
	}
	return shop.finish(context.WithoutCancel(ctx), obs)
}

// consoleHint says how to see the shop in the operations console.
func consoleHint(out io.Writer, brokers []string, opts options) {
	fmt.Fprintln(out, "see the consumers' lag, the dead letter and the outbox in the operations console:")
	fmt.Fprintf(out, "  go run ./cmd/koto console -brokers %s -schema %s\n", strings.Join(brokers, ","), opts.schema)
	if os.Getenv("KAFKA_BROKERS") == "" && !opts.keepRunning {
		fmt.Fprintln(out, "  (the embedded broker stops with the shop: run the shop with -keep-running)")
	}
}

// kafkaBrokers returns KAFKA_BROKERS, or starts an embedded broker.
func kafkaBrokers(ctx context.Context, out io.Writer) ([]string, func(), error) {
	if env := os.Getenv("KAFKA_BROKERS"); env != "" {
		return broker.SplitBrokers(env), func() {}, nil
	}
	b, err := embedded.Start(ctx, embedded.WithPartitions(4))
	if err != nil {
		return nil, nil, fmt.Errorf("start the embedded Kafka broker: %w", err)
	}
	fmt.Fprintln(out, "embedded Kafka broker on", b.Addrs()[0])
	return b.Addrs(), func() { _ = b.Close() }, nil
}

// postgresPool connects to DATABASE_URL, or to the default local database.
func postgresPool(ctx context.Context) (*pgxpool.Pool, error) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL %s: %w", url, err)
	}
	// A transactional handler holds a connection per partition it consumes.
	cfg.MaxConns = max(cfg.MaxConns, 10)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		return nil, errors.Join(fmt.Errorf("PostgreSQL at %s: %w", url, err),
			errors.New("start PostgreSQL (e.g. docker compose up -d postgres) or set DATABASE_URL"))
	}
	return pool, nil
}
