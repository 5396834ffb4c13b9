package broker_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestNoKafka: with no broker listening, what connects reports the refused
// connection.
func TestNoKafka(t *testing.T) {
	cfg := broker.Config{Brokers: []string{kototest.ClosedAddr(t)}}
	pub, err := broker.NewPublisher(cfg)
	if pub != nil {
		t.Error("NewPublisher returned a publisher with its error")
	}
	kototest.WantRefused(t, "NewPublisher", err)

	prod, err := broker.NewProducer(cfg)
	if prod != nil {
		t.Error("NewProducer returned a producer with its error")
	}
	kototest.WantRefused(t, "NewProducer", err)

	r, err := broker.NewTailReader(cfg, "t", func(*message.Message) {})
	if err != nil {
		t.Fatalf("NewTailReader: %v", err)
	}
	defer r.Close()
	kototest.WantRefused(t, "TailReader.Start", r.Start(kototest.Context(t)))
}
