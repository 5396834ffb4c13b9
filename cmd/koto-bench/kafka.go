package main

import (
	"context"
	"strings"

	"github.com/koto-dev/watermill-koto/broker/embedded"
)

// splitBrokers parses a -brokers flag: comma-separated host:port, blanks
// dropped.
func splitBrokers(flag string) []string {
	var brokers []string
	for _, b := range strings.Split(flag, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	return brokers
}

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
