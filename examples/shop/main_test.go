package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

func TestMain(m *testing.M) {
	kototest.VerifyTestMain(m)
}

// TestShop runs the example end to end: it fails if an order is not paid,
// is charged twice, or the malformed message misses the dead-letter topic,
// and if the shop does not end by saying how to open the console on it.
func TestShop(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Name("shop_test")
	t.Cleanup(func() { pgtest.DropSchema(t, pool, schema) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var out strings.Builder
	if err := run(context.Background(), options{orders: 5, schema: schema, log: log, out: &out}); err != nil {
		t.Fatal(err)
	}
	if want := "go run ./cmd/koto console -brokers "; !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "-schema "+schema) {
		t.Fatalf("the shop's closing lines %q do not say how to open the console (%q … -schema %s)", out.String(), want, schema)
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
	s, err := newShop(kototest.Context(t), []string{kototest.ClosedAddr(t)}, pool, opts, obs)
	if s != nil {
		t.Error("newShop returned a shop with its error")
	}
	kototest.WantRefused(t, "newShop", err)
}
