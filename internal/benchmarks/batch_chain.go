package benchmarks

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/middleware"
)

// Batches of BatchChain: up to BatchChainSize messages, two at once.
const (
	BatchChainSize     = 64
	batchChainParallel = 2
	batchChainInFlight = (batchChainParallel + 1) * BatchChainSize
)

// BatchChain measures what one message costs through
// middleware.BatchDefaults with a no-op batch handler, without Kafka,
// the router or a database: at least (Parallel+1) × BatchChainSize
// goroutines (b.RunParallel) call the batch chain's handler function,
// wrapped in its per-message middlewares, each with a new message, as a
// concurrent subscriber's deliveries would, so that the batches fill. With
// store, the chain checks and marks each batch on an
// idempotency.MemoryStore. Each op is one message; it reports
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
	b.SetParallelism((batchChainInFlight + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := h(message.NewMessage(uuid.Must(uuid.NewV7()).String(), payload)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(handled.Load())/float64(b.N), "handled/op")
	if mem != nil {
		b.ReportMetric(float64(mem.Len())/float64(b.N), "marked/op")
	}
}

// batchChainHandler returns the router handler function of a batch chain
// of fn, wrapped in the chain's per-message middlewares, its store when
// store is true, and what closes the chain and what it opened.
func batchChainHandler(store bool, fn middleware.BatchHandlerFunc) (message.HandlerFunc, *idempotency.MemoryStore, func(), error) {
	cfg, mem, closeCfg := directConfig("batch-chain", store)
	chain, err := middleware.BatchDefaults(cfg, middleware.BatchConfig{MaxMessages: BatchChainSize, Parallel: batchChainParallel,
		MaxWait: 5 * time.Millisecond})
	if err != nil {
		closeCfg()
		return nil, nil, nil, err
	}
	batch := chain.Handler(fn)
	h := message.HandlerFunc(func(msg *message.Message) ([]*message.Message, error) { return nil, batch(msg) })
	return wrap(h, chain.Middlewares()), mem, func() { _ = chain.Close(context.Background()); closeCfg() }, nil
}
