package main

import (
	"io"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/kototest"
)

// TestCheckout: a checkout reserves stock by request/reply and writes its
// order and OrderPlaced, twice, through the outbox; payments charges it
// once and orders sees it paid; a malformed OrderPlaced is dead-lettered.
func TestCheckout(t *testing.T) {
	h := kototest.New(t)
	s, err := newShop(h.Context(), h.Broker().Brokers, h.Pool(), options{schema: h.Schema(), log: h.Logger(), out: io.Discard, router: h.Router()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.Defer(s.Close)
	h.Run()
	if err := s.placeOrder(h.Context(), "o-1", 1); err != nil {
		t.Fatal(err)
	}
	bad := message.NewMessage(watermill.NewUUID(), []byte(`{"orderId": 42`))
	if err := s.pub.Publish("orders.order-placed", bad); err != nil {
		t.Fatal(err)
	}
	h.Wait()
	if paid := kototest.Consumed[PaymentProcessed](h, kototest.Handled); len(paid) != 1 || paid[0].OrderID != "o-1" {
		t.Errorf("PaymentProcessed handled: %v, want o-1's once", paid)
	}
	if charges, err := s.ledger.charges(h.Context(), "o-1"); charges != 1 || err != nil {
		t.Errorf("o-1 charged %d times (%v), want once", charges, err)
	}
	if dl := h.DeadLetters(); len(dl) != 1 || dl[0].Message.UUID != bad.UUID {
		t.Errorf("dead letters %v, want the malformed OrderPlaced", dl)
	}
}
