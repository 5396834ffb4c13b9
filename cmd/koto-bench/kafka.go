package main

import (
	"context"
	"flag"
	"strings"
	"time"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/kototest"
)

// kafkaFor returns brokers, or starts an embedded broker when there are
// none, with a phrase saying which, and a function that stops what it
// started.
func kafkaFor(ctx context.Context, brokers []string) (addrs []string, where string, stop func(), err error) {
	if len(brokers) > 0 {
		return brokers, "the Kafka cluster at " + strings.Join(brokers, ","), func() {}, nil
	}
	b, err := embedded.Start(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	return b.Addrs(), "an embedded broker", func() { _ = b.Close() }, nil
}

// brokersFlag defines -brokers on fs, defaulting to KAFKA_BROKERS, and
// returns a function that gives the parsed list; empty means an embedded
// broker, started by kafkaFor. per names what gets one ("" for the run).
func brokersFlag(fs *flag.FlagSet, per string) func() []string {
	usage := "comma-separated Kafka brokers, `host:port,...` (default $" + kototest.EnvBrokers + "; empty: an embedded broker"
	if per != "" {
		usage += " per " + per
	}
	// The default is read after parsing, so that the help names the
	// variable rather than showing its value as the default.
	brokers := fs.String("brokers", "", usage+")")
	return func() []string {
		set := false
		fs.Visit(func(f *flag.Flag) { set = set || f.Name == "brokers" })
		if !set {
			return kototest.FromEnv()
		}
		return broker.SplitBrokers(*brokers)
	}
}

// setBenchtime sets the time testing.Benchmark runs each benchmark for.
func setBenchtime(d time.Duration) error {
	return flag.Set("test.benchtime", d.String())
}
