package main

import (
	"cmp"
	"errors"
	"io"
	"testing"

	"github.com/koto-dev/watermill-koto/kototest"
)

// startShop starts the shop's services on the harness's broker, schema
// and router, as run starts them on its own, and runs the router.
func startShop(t *testing.T, h *kototest.Harness, opts options, obs *observability) *shop {
	t.Helper()
	opts.schema, opts.router, opts.log = h.Schema(), h.Router(), cmp.Or(opts.log, h.Logger())
	opts.out = cmp.Or[io.Writer](opts.out, io.Discard)
	s, err := newShop(h.Context(), h.Broker().Brokers, h.Pool(), opts, obs)
	if err != nil {
		t.Fatal(err)
	}
	h.Defer(s.Close)
	h.Run()
	return s
}

// settle waits until checkout's messages and all they caused are handled,
// the charge the card gateway was too busy for included: parked for
// gatewayBusyFor, it comes back once the harness made that much time pass.
func settle(h *kototest.Harness) {
	h.Wait()
	h.Advance(gatewayBusyFor)
	h.Wait()
}

// TestCheckout: a checkout reserves stock by request/reply and writes its
// order and OrderPlaced, twice, through the outbox; payments charges it
// once and orders sees it paid; a malformed OrderPlaced is dead-lettered.
func TestCheckout(t *testing.T) {
	h := kototest.New(t)
	s := startShop(t, h, options{}, nil)
	if err := errors.Join(s.placeOrder(h.Context(), "o-1", 1), s.sendMalformed()); err != nil {
		t.Fatal(err)
	}
	h.Wait()
	if paid := kototest.Consumed[PaymentProcessed](h, kototest.Handled); len(paid) != 1 || paid[0].OrderID != "o-1" {
		t.Errorf("PaymentProcessed handled: %v, want o-1's once", paid)
	}
	if charges, err := s.ledger.charges(h.Context(), "o-1"); charges != 1 || err != nil {
		t.Errorf("o-1 charged %d times (%v), want once", charges, err)
	}
	if dl := h.DeadLetters(); len(dl) != 1 || dl[0].Message.UUID != s.malformed {
		t.Errorf("dead letters %v, want the malformed OrderPlaced", dl)
	}
}
