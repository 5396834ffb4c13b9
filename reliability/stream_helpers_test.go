package reliability

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// fullOrShort returns full under -full, or else short.
func fullOrShort(full, short int) int {
	if *fullSize {
		return full
	}
	return short
}

// keyedMessages returns n messages with new UUIDs and payloads "<prefix>-i";
// each is its own partition key, so that a re-publication with the same UUID
// lands on the same partition, as a Kafka redelivery would.
func keyedMessages(prefix string, n int) []*message.Message {
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(prefix+"-"+strconv.Itoa(i)))
		msgs[i].Metadata.Set(koto.PartitionKeyMetadataKey, msgs[i].UUID)
	}
	return msgs
}

// withRepublished returns originals with a re-publication (same UUID,
// payload and metadata) of message i/2 after every fifth message i: 20 %
// duplicates, each later on its partition than its original.
func withRepublished(originals []*message.Message) []*message.Message {
	return kototest.WithDuplicates(originals, func(i int) bool { return i%5 == 4 })
}

// effectLedger records the effects of handlers: one entry per run of a handler
// that succeeded, by message UUID.
type effectLedger struct{ kototest.Counter }

// add records the effect of msg.
func (l *effectLedger) add(msg *message.Message) error {
	l.Add(msg.UUID)
	return nil
}

// tally compares the ledger with the distinct messages that were sent: the
// effects beyond one per message, and the messages without an effect.
func (l *effectLedger) tally(sent []*message.Message) (duplicates, losses int) {
	for _, m := range sent {
		switch n := l.Get(m.UUID); {
		case n == 0:
			losses++
		case n > 1:
			duplicates += n - 1
		}
	}
	return duplicates, losses
}

// routedConsumer is a Watermill router over the embedded broker with one
// handler behind middleware.Defaults, which writes each message's effect
// into a ledger.
type routedConsumer struct {
	done atomic.Int64 // deliveries the chain acked: effects and skipped duplicates
	stop func()
}

// routedSpec configures [startRouted].
type routedSpec struct {
	cfg    broker.Config // brokers and consumer group (also the handler name)
	topic  string
	store  idempotency.Store // nil: no deduplication
	effect func(*message.Message) error
}

// startRouted runs spec's handler on a router of its own until t ends or
// stop is called. Retries are fast, so that an outage is retried often.
func startRouted(t testing.TB, pub message.Publisher, spec routedSpec) *routedConsumer {
	t.Helper()
	chain, err := middleware.Defaults(middleware.Config{
		Publisher: pub,
		Store:     spec.store,
		Logger:    kototest.Logger(slog.LevelError),
		DeadLetter: middleware.DeadLetterConfig{
			Backoff: koto.Backoff{InitialInterval: 5 * time.Millisecond, MaxInterval: 100 * time.Millisecond},
		},
	})
	if err != nil {
		t.Fatalf("middleware.Defaults: %v", err)
	}
	t.Cleanup(func() {
		// t.Context has ended by now; Close waits for the chain's marks.
		ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
		defer cancel()
		if err := chain.Close(ctx); err != nil {
			t.Errorf("close the middleware chain: %v", err)
		}
	})
	c := &routedConsumer{}
	router := kototest.NewRouter(t, nil)
	sub := kototest.NewSubscriber(t, spec.cfg)
	h := router.AddConsumerHandler(spec.cfg.ConsumerGroup, spec.topic, sub, spec.effect)
	h.AddMiddleware(c.count)
	h.AddMiddleware(chain.Middlewares()...)
	c.stop = kototest.RunRouter(t, router)
	return c
}

// count counts the deliveries that the chain acked.
func (c *routedConsumer) count(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		out, err := h(msg)
		if err == nil {
			c.done.Add(1)
		}
		return out, err
	}
}

// waitDone waits until c acked n deliveries, at most limit; it returns how
// long that took.
func (c *routedConsumer) waitDone(t testing.TB, n int64, limit time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	for c.done.Load() < n {
		if time.Since(start) > limit {
			t.Fatalf("%s: %d of %d deliveries handled after %v", what, c.done.Load(), n, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// msgRate formats n messages in d as msg/s.
func msgRate(n int, d time.Duration) string {
	return fmt.Sprintf("%.0f msg/s", float64(n)/d.Seconds())
}

// reserveStock is the command of the request/reply in TestBrokerFaults.
type reserveStock struct {
	SKU string `json:"sku"`
}

// stockReserved is reserveStock's reply.
type stockReserved struct {
	SKU string `json:"sku"`
}

// reserveConsumer is the inventory service's consumer: it answers each
// reserveStock with the SKU it reserved.
func reserveConsumer() cqrs.Consumer {
	return cqrs.NewCommandConsumerWithResult(func(_ context.Context, cmd *reserveStock) (stockReserved, error) {
		return stockReserved(*cmd), nil
	})
}

// reserveRoutes sends reserveStock to the inventory service's command topic.
func reserveRoutes(inventory string) []cqrs.Route {
	return []cqrs.Route{cqrs.RouteOf[reserveStock](topics.Command(inventory, topics.TypeName(reserveStock{})))}
}

// startDispatcher returns a function that takes what a constructor of a
// dispatcher returned, fails t on its error, and starts the dispatcher,
// which is closed when t ends.
func startDispatcher(t testing.TB) func(*cqrs.CommandDispatcher, error) *cqrs.CommandDispatcher {
	return func(d *cqrs.CommandDispatcher, err error) *cqrs.CommandDispatcher {
		t.Helper()
		if err != nil {
			t.Fatalf("command dispatcher: %v", err)
		}
		t.Cleanup(func() { _ = d.Close() })
		if err := d.Start(kototest.Context(t)); err != nil {
			t.Fatalf("dispatcher Start: %v", err)
		}
		return d
	}
}
