package main

import (
	"context"
	"strings"

	"github.com/koto-dev/watermill-koto/broker/embedded"
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
