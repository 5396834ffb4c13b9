package main

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

func TestMain(m *testing.M) {
	kototest.VerifyTestMain(m)
}

// TestShop runs the example's checkout and report, the console hint
// after them, on the harness: it fails if an order is not paid, is
// charged twice, or the malformed message misses the dead-letter topic;
// if the charge the card gateway was too busy for is not parked; and if
// the shop does not end by saying how to open the console on it.
func TestShop(t *testing.T) {
	h := kototest.New(t)
	var out strings.Builder
	s := startShop(t, h, options{out: &out}, nil)
	const orders = 5
	if err := s.checkout(h.Context(), "t", orders); err != nil {
		t.Fatal(err)
	}
	settle(h)

	var paid []string
	for _, p := range kototest.Consumed[PaymentProcessed](h, kototest.Handled) {
		paid = append(paid, p.OrderID)
	}
	slices.Sort(paid)
	if want := []string{"o-t-1", "o-t-2", "o-t-3", "o-t-4", "o-t-5"}; !slices.Equal(paid, want) {
		t.Errorf("PaymentProcessed handled for %v, want %v once each", paid, want)
	}
	if charges, err := s.ledger.charges(h.Context(), "o-t-%"); charges != orders || err != nil {
		t.Errorf("%d charges (%v) for %d orders, want one each", charges, err, orders)
	}
	if dl := h.DeadLetters(); len(dl) != 1 || dl[0].Message.UUID != s.malformed {
		t.Errorf("dead letters %v, want the malformed OrderPlaced alone", dl)
	}
	parked := map[string]int{} // deliveries parked, by order
	for _, p := range kototest.Consumed[OrderPlaced](h, kototest.Parked) {
		parked[p.OrderID]++
	}
	if len(parked) != 1 || parked["o-t-2"] == 0 {
		t.Errorf("OrderPlaced parked: %v, want o-t-2's alone: the card gateway was too busy for it", parked)
	}
	if s.gateway.busy.Load() != 1 {
		t.Errorf("the card gateway was too busy %d times, want once", s.gateway.busy.Load())
	}

	if err := s.report(h.Context(), "t", orders); err != nil {
		t.Fatal(err)
	}
	consoleHint(&out, h.Broker().Brokers, options{schema: h.Schema()})
	for _, want := range []string{"dead letter on payments.order-placed-consumer.dlq", "go run ./cmd/koto console -brokers ", "-schema " + h.Schema()} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the shop's lines do not say %q:\n%s", want, out.String())
		}
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
