package benchmarks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sentAtHeader carries, in the records of a latency run, when the record
// was handed to the producer, in Unix nanoseconds.
const sentAtHeader = "koto_bench_sent_at"

// latencies collects how long each message took from its produce call to
// the end of its handling.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(msg *message.Message) {
	stamp := msg.Metadata.Get(sentAtHeader)
	if stamp == "" {
		return // not a latency run's: no error allocated
	}
	sent, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil {
		return
	}
	d := time.Since(time.Unix(0, sent))
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// quantile returns the q-quantile of sorted.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// LatencyResult is the handling latency of a variant at a fixed offered
// load.
type LatencyResult struct {
	Variant  E2EVariant
	Rate     float64 // offered, messages per second
	Messages int
	P50, P99 time.Duration
	// CPU is what the runs cost from the producer's start to the last
	// message's handling: the producer and the embedded broker, when
	// there is one, count in this process's.
	CPU     CPU
	samples []time.Duration // sorted
}

// Add returns the result of r's runs and o's together.
func (r LatencyResult) Add(o LatencyResult) LatencyResult {
	if r.Messages == 0 {
		r.Variant, r.Rate = o.Variant, o.Rate
	}
	r.Messages += o.Messages
	r.CPU = r.CPU.Add(o.CPU)
	r.samples = slices.Concat(r.samples, o.samples)
	slices.Sort(r.samples)
	r.P50, r.P99 = quantile(r.samples, 0.5), quantile(r.samples, 0.99)
	return r
}

// Latency runs v on a new topic that a producer writes n records to at
// rate records per second, keyed as the other runs' are, and measures
// each message from the moment it was handed to the producer to the end
// of its handling. The producer starts once the consumer handled a first
// record, which is not measured: the consumer has joined its group.
func (e *E2E) Latency(ctx context.Context, v E2EVariant, rate float64, n int) (LatencyResult, error) {
	res := LatencyResult{Variant: v, Rate: rate, Messages: n}
	topic, group, err := e.newTopic(ctx)
	if err != nil {
		return res, err
	}
	if err := fill(ctx, e.brokers, topic, 1, v.keys()); err != nil {
		return res, err
	}
	run, err := e.startOn(ctx, v, topic, group, n+1)
	if err != nil {
		return res, err
	}
	select {
	case <-run.First():
	case <-ctx.Done():
	}
	start := sampleCPU()
	err = errors.Join(produceAt(ctx, e.brokers, topic, rate, n, v.keys()), wait(ctx, run))
	res.CPU = sampleCPU().since(start, benchBackends(ctx, e.pool))
	run.latency.mu.Lock()
	res.samples = slices.Sorted(slices.Values(run.latency.d))
	run.latency.mu.Unlock()
	res.P50, res.P99 = quantile(res.samples, 0.5), quantile(res.samples, 0.99)
	return res, errors.Join(err, run.Close())
}

func wait(ctx context.Context, run *E2ERun) error {
	_, err := run.Wait(ctx)
	return err
}

// produceAt writes n records of keys keys to topic at rate per second,
// each stamped with sentAtHeader, and returns once all were acknowledged.
func produceAt(ctx context.Context, brokers []string, topic string, rate float64, n, keys int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	var (
		mu       sync.Mutex
		firstErr error
	)
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		rec := record(i, keys)
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: sentAtHeader, Value: []byte(strconv.FormatInt(time.Now().UnixNano(), 10))})
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = cmp.Or(firstErr, err)
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return fmt.Errorf("produce to %s: %w", topic, firstErr)
	}
	return nil
}
