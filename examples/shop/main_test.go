package main

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/internal/pgtest"
)

func TestMain(m *testing.M) {
	// sarama's metrics library starts one process-wide ticker it never stops.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// TestShop runs the example end to end: it fails if an order is not paid,
// is charged twice, or the malformed message misses the dead-letter topic.
func TestShop(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Name("shop_test")
	t.Cleanup(func() { pgtest.DropSchema(t, pool, schema) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := run(context.Background(), options{orders: 5, schema: schema, log: log}); err != nil {
		t.Fatal(err)
	}
}
