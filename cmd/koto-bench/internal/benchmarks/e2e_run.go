package benchmarks

import (
	"context"
	"errors"
	"fmt"
	koto "github.com/koto-dev/watermill-koto"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/middleware"
)

// E2ERun is one run of a variant: a router consuming n messages. The clock
// starts when the first message enters the chain, after the consumer group
// has been joined, and stops when the n-th has left it (committed, in the
// transactional mode).
type E2ERun struct {
	n       int64
	handled atomic.Int64
	first   chan struct{}
	once    sync.Once
	done    chan struct{}
	start   time.Time // written once, before first is closed
	end     time.Time // written once, before done is closed
	router  *message.Router
	chain   chain
	stopped chan error
	latency latencies // of the messages that carry when they were sent
	// cpuStart and cpuEnd are sampled with start and end.
	cpuStart, cpuEnd cpuSample
}

// Start fills a new topic with n messages, then starts a router that
// consumes it with variant v in a new consumer group. It returns once the
// router runs; messages flow soon after. Close the run when done.
func (e *E2E) Start(ctx context.Context, v E2EVariant, n int) (*E2ERun, error) {
	topic, group, err := e.newTopic(ctx)
	if err != nil {
		return nil, err
	}
	if err := fill(ctx, e.brokers, topic, n, v.keys()); err != nil {
		return nil, err
	}
	return e.startOn(ctx, v, topic, group, n)
}

// newTopic provisions the topic of a new run, and names its group.
func (e *E2E) newTopic(ctx context.Context) (topic, group string, err error) {
	id := e.prefix + "-" + strconv.FormatInt(e.runs.Add(1), 10)
	topic, group = id+".e2e", id+".e2e-consumer"
	cfg := broker.Config{Brokers: e.brokers, Provision: broker.ProvisionConfig{Partitions: E2EPartitions}}
	return topic, group, broker.ProvisionTopics(ctx, cfg, topic)
}

// startOn starts a router that consumes n messages of topic with v in
// group.
func (e *E2E) startOn(ctx context.Context, v E2EVariant, topic, group string, n int) (*E2ERun, error) {
	r := &E2ERun{n: int64(n), first: make(chan struct{}), done: make(chan struct{}), stopped: make(chan error, 1)}
	if err := e.route(r, v, topic, group); err != nil {
		return nil, err
	}
	go func() { r.stopped <- r.router.Run(context.Background()) }()
	select {
	case <-r.router.Running():
		return r, nil
	case err := <-r.stopped:
		return nil, errors.Join(fmt.Errorf("router stopped at start: %w", err), r.chain.Close(ctx))
	case <-ctx.Done():
		_ = r.Close()
		return nil, ctx.Err()
	}
}

// route builds r's router: the clock middleware, the chain of v and its
// handler.
func (e *E2E) route(r *E2ERun, v E2EVariant, topic, group string) error {
	chain, h, err := e.consumer(v, nil)
	if err != nil {
		return err
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, watermill.NopLogger{})
	if err != nil {
		return errors.Join(err, chain.Close(context.Background()))
	}
	cfg := broker.Config{Brokers: e.brokers, ConsumerGroup: group, Concurrency: v.Concurrency}
	newSub := broker.NewSubscriber
	if v.Batch > 0 {
		cfg.Concurrency = 0
		cfg.Batch = broker.BatchConfig{MaxMessages: v.Batch, Parallel: BatchParallel}
		newSub = broker.NewBatchSubscriber
	}
	sub, err := newSub(cfg)
	if err != nil {
		return errors.Join(err, chain.Close(context.Background()))
	}
	router.AddConsumerHandler(group, topic, sub, h).
		AddMiddleware(append([]message.HandlerMiddleware{r.clock}, chain.Middlewares()...)...)
	r.router, r.chain = router, chain
	return nil
}

// consumer returns the chain of v and the handler function of its router
// handler: v's handler, or with Batch, the batch chain's handler of v's
// batch handler. A nil scope means the default, the handler name.
func (e *E2E) consumer(v E2EVariant, scope func(*message.Message) string) (chain, message.NoPublishHandlerFunc, error) {
	if v.Batch == 0 {
		c, err := e.chain(v, scope)
		return c, e.handler(v), err
	}
	c, err := e.batchChain(v, scope)
	if err != nil {
		return nil, nil, err
	}
	return c, c.Handler(e.batchHandler(v)), nil
}

// chain is the middleware chain of a variant: a *middleware.Chain, a
// *middleware.BatchChain, or the one without telemetry.
type chain interface {
	Middlewares() []message.HandlerMiddleware
	Close(ctx context.Context) error
}

// chain returns middleware.Defaults with the idempotency and telemetry of
// v, logging to a discarding logger; a nil scope means the default, the
// handler name.
func (e *E2E) chain(v E2EVariant, scope func(*message.Message) string) (chain, error) {
	if v.Telemetry == TelemetryNone {
		return withoutTelemetry(e.pub, slog.New(slog.DiscardHandler))
	}
	return middleware.Defaults(e.config(v, scope))
}

// config is the middleware.Config of v: dead letters to e's publisher,
// logs discarded, v's telemetry and idempotency.
func (e *E2E) config(v E2EVariant, scope func(*message.Message) string) middleware.Config {
	cfg := middleware.Config{Publisher: e.pub, Logger: slog.New(slog.DiscardHandler)}
	if v.Telemetry == TelemetrySDK {
		cfg.Telemetry = e.sdk.tel
	}
	cfg.Idempotency.Scope = scope
	_, store := e.db(v)
	switch v.Idempotency {
	case CheckHandleMark:
		cfg.Store = store
	case Transactional:
		cfg.Store, cfg.Idempotency.Transactional = store, true
	case TransactionalDeferred:
		cfg.Store, cfg.Idempotency.Transactional, cfg.Idempotency.DeferClaim = store, true, true
	}
	return cfg
}

// plainChain is middleware.Defaults without telemetry and idempotency:
// Correlation, Logging, DeadLetter.
type plainChain []message.HandlerMiddleware

func withoutTelemetry(pub message.Publisher, logger *slog.Logger) (plainChain, error) {
	dl, err := middleware.DeadLetter(pub, middleware.DeadLetterConfig{})
	if err != nil {
		return nil, err
	}
	return plainChain{middleware.Correlation, middleware.Logging(logger), dl}, nil
}

func (c plainChain) Middlewares() []message.HandlerMiddleware { return c }
func (c plainChain) Close(context.Context) error              { return nil }

// clock is the outermost middleware: it starts the clock at the first
// message and stops it when n messages have been handled, each message
// of a batch counting once it was acked.
func (r *E2ERun) clock(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		r.once.Do(func() { r.cpuStart, r.start = sampleCPU(), time.Now(); close(r.first) })
		produced, err := h(msg)
		if err != nil {
			return produced, err
		}
		msgs := []*message.Message{msg}
		if b, ok := koto.BatchFromContext(msg.Context()); ok {
			msgs = b.Messages
		}
		for _, m := range msgs {
			if !acked(m) {
				continue
			}
			r.latency.add(m)
			if r.handled.Add(1) == r.n {
				r.end, r.cpuEnd = time.Now(), sampleCPU()
				close(r.done)
			}
		}
		return produced, err
	}
}

// acked reports whether a message of a batch was acked; one handled alone
// is, when its handler returned nil.
func acked(m *message.Message) bool {
	select {
	case <-m.Acked():
		return true
	case <-m.Nacked():
		return false
	default:
		return true
	}
}

// First is closed when the first message enters the chain.
func (r *E2ERun) First() <-chan struct{} { return r.first }

// Wait waits until all n messages have been handled, and returns the time
// from the first one entering the chain to the last one leaving it.
func (r *E2ERun) Wait(ctx context.Context) (time.Duration, error) {
	select {
	case <-r.done:
		return r.end.Sub(r.start), nil
	case err := <-r.stopped:
		r.stopped <- err // for Close
		return 0, fmt.Errorf("router stopped after %d of %d messages: %v", r.handled.Load(), r.n, err)
	case <-ctx.Done():
		return 0, fmt.Errorf("%d of %d messages handled: %w", r.handled.Load(), r.n, ctx.Err())
	}
}

// Close stops the router, waits for it, and closes the chain.
func (r *E2ERun) Close() error {
	err := r.router.Close()
	return errors.Join(err, <-r.stopped, r.chain.Close(context.Background()))
}
