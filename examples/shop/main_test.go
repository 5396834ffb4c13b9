package main

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/koto-dev/watermill-koto/internal/kafkatest"
	"github.com/koto-dev/watermill-koto/internal/pgtest"
)

func TestMain(m *testing.M) {
	kafkatest.VerifyTestMain(m)
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
