package benchmarks

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/middleware"
)

// BatchChainSize is the size of BatchChain's batches.
const BatchChainSize = 64

// BatchChain measures what one message costs through
// middleware.BatchDefaults with a no-op batch handler, without Kafka,
// the router or a database: batches of BatchChainSize new messages, each
// with its position, handed to the chain's handler function as a batch
// subscriber hands them. With store, the chain checks and marks each
// batch on an idempotency.MemoryStore. Each op is one message; it reports
// allocations, the messages the handler got as "handled/op" (1 when none
// was lost) and, with store, the marks as "marked/op".
func BatchChain(b *testing.B, store bool) {
	var handled atomic.Int64
	h, mem, closeChain, err := batchChainHandler(store, func(_ context.Context, msgs []*message.Message) error {
		handled.Add(int64(len(msgs)))
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	defer closeChain()
	payload := []byte(`{"order_id":1,"amount":10}`)
	b.ReportAllocs()
	var offset int64
	for n := 0; n < b.N; n += BatchChainSize {
		size := min(BatchChainSize, b.N-n)
		msgs := make([]*message.Message, size)
		for i := range msgs {
			msgs[i] = message.NewMessage(uuid.Must(uuid.NewV7()).String(), payload)
			msgs[i].SetContext(koto.ContextWithPosition(context.Background(), koto.Position{Topic: "batch-chain", Offset: offset, Key: []byte{byte(offset)}}))
			offset++
		}
		env := message.NewMessage(uuid.Must(uuid.NewV7()).String(), nil)
		env.SetContext(koto.ContextWithBatch(context.Background(), koto.NewBatch(msgs, nil)))
		if err := h(env); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(handled.Load())/float64(b.N), "handled/op")
	if mem != nil {
		b.ReportMetric(float64(mem.Len())/float64(b.N), "marked/op")
	}
}

// batchChainHandler returns the router handler function of a batch chain
// of fn, its store when store is true, and what closes the chain and what
// it opened.
func batchChainHandler(store bool, fn middleware.BatchHandlerFunc) (message.NoPublishHandlerFunc, *idempotency.MemoryStore, func(), error) {
	cfg, mem, closeCfg := directConfig("batch-chain", store)
	chain, err := middleware.BatchDefaults(cfg, middleware.BatchConfig{})
	if err != nil {
		closeCfg()
		return nil, nil, nil, err
	}
	return chain.Handler(fn), mem, func() { _ = chain.Close(context.Background()); closeCfg() }, nil
}
