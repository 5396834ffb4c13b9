package deadletter_test

import (
	"testing"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/deadletter"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestNewQueueNoKafka: with no broker listening, NewQueue reports the
// refused connection.
func TestNewQueueNoKafka(t *testing.T) {
	q, err := deadletter.NewQueue(deadletter.Config{
		Broker:        broker.Config{Brokers: []string{kototest.ClosedAddr(t)}},
		ConsumerGroup: "payments.order-placed-consumer",
	})
	if q != nil {
		t.Error("NewQueue returned a queue with its error")
	}
	kototest.WantRefused(t, "NewQueue", err)
}
