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

// TestShopNoKafka: with no broker listening, newShop cleans up and reports
// the refused connection.
func TestShopNoKafka(t *testing.T) {
	pool := pgtest.Pool(t)
	opts := options{orders: 1, schema: pgtest.Name("shop_test"), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	t.Cleanup(func() { pgtest.DropSchema(t, pool, opts.schema) })
	obs, err := newObservability(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	s, err := newShop(kafkatest.Context(t), []string{kafkatest.ClosedAddr(t)}, pool, opts, obs)
	if s != nil {
		t.Error("newShop returned a shop with its error")
	}
	kafkatest.WantRefused(t, "newShop", err)
}
