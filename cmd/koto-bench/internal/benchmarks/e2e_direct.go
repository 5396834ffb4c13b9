package benchmarks

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
)

// Direct runs variant v without Kafka and the router: E2EPartitions
// goroutines, one per partition the router would consume (v.Concurrency
// when that is more), call v's chain
// and handler directly with n new messages between them, one at a time
// each, as the router does. It returns the time they took. Beside
// [E2E.Consume] it tells the cost of the chain and the database from that
// of the transport; the ratios between variants it gives are the most the
// router could show on the same machine.
func (e *E2E) Direct(ctx context.Context, v E2EVariant, n int) (time.Duration, error) {
	group := e.prefix + "-" + strconv.FormatInt(e.runs.Add(1), 10) + ".direct-consumer"
	chain, handle, err := e.consumer(v, func(*message.Message) string { return group })
	if err != nil {
		return 0, err
	}
	h := message.HandlerFunc(func(msg *message.Message) ([]*message.Message, error) {
		return nil, handle(msg)
	})
	d, err := runWorkers(ctx, max(E2EPartitions, v.Concurrency), n, wrap(h, chain.Middlewares()))
	return d, errors.Join(err, chain.Close(context.Background()))
}

// runWorkers calls h with n new messages from workers goroutines and
// returns the time it took, or the first error.
func runWorkers(ctx context.Context, workers, n int, h message.HandlerFunc) (time.Duration, error) {
	return runChunks(ctx, workers, n, 1, func(i, _ int64) error {
		msg := message.NewMessage(uuid.Must(uuid.NewV7()).String(), payload(i))
		msg.SetContext(ctx)
		_, err := h(msg)
		return err
	})
}

// runChunks calls fn with the messages from 0 to n, size at a time (the
// last chunk may be smaller), from workers goroutines, and returns the
// time it took, or the first error.
func runChunks(ctx context.Context, workers, n, size int, fn func(from, to int64) error) (time.Duration, error) {
	var (
		next     atomic.Int64
		once     sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for to := next.Add(int64(size)); to-int64(size) < int64(n) && ctx.Err() == nil; to = next.Add(int64(size)) {
				if err := fn(to-int64(size), min(to, int64(n))); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	return d, errors.Join(firstErr, ctx.Err())
}

// payload is the JSON payload of the i-th message.
func payload(i int64) []byte {
	return []byte(`{"order_id":` + strconv.FormatInt(i, 10) + `,"amount":10}`)
}
