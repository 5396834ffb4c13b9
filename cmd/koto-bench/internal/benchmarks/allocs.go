package benchmarks

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/google/uuid"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/middleware"
)

// AllocsCase is one consumer path of ConsumerAllocs.
type AllocsCase struct {
	// Name names the path in results.
	Name string
	// Chain is true when middleware.Defaults wraps the handler.
	Chain bool
	// Store is true when the chain has check-handle-mark idempotency on
	// an idempotency.MemoryStore.
	Store bool
	// Parking is true when the chain parks (DeadLetterConfig.Parking),
	// with nothing parked.
	Parking bool
}

// AllocsCases returns the paths ConsumerAllocs measures: the bare handler,
// middleware.Defaults without idempotency, and middleware.Defaults with
// check-handle-mark on a MemoryStore.
func AllocsCases() []AllocsCase {
	return []AllocsCase{
		{Name: "handler alone"},
		{Name: "Defaults, no idempotency", Chain: true},
		{Name: "Defaults + check-handle-mark (memory store)", Chain: true, Store: true},
		{Name: "Defaults + parking, nothing parked", Chain: true, Parking: true},
	}
}

// ConsumerAllocs measures what one delivery allocates on path c: it calls
// the no-op handler, wrapped as c says, directly with a new message per
// operation (a new UUID, a small payload, as a subscriber would hand it
// over, with its position on one of 16 keys of a partition), with no
// transport, so that the transport's allocations do not drown the chain's.
// Dead letters, none expected, would go to a gochannel Pub/Sub. The
// operation's own message is counted on every path; the difference
// between paths is the chain's.
func ConsumerAllocs(b *testing.B, c AllocsCase) {
	h, closeChain, err := allocsHandler(c)
	if err != nil {
		b.Fatal(err)
	}
	defer closeChain()
	payload := []byte(`{"order_id":1,"amount":10}`)
	var keys [16][]byte
	for i := range keys {
		keys[i] = []byte{'k', byte('a' + i)}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		msg := message.NewMessage(uuid.Must(uuid.NewV7()).String(), payload)
		msg.SetContext(koto.ContextWithPosition(msg.Context(),
			koto.Position{Topic: "allocs", Offset: int64(i), Key: keys[i%len(keys)], Generation: 1}))
		i++
		if _, err := h(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// nothingParked is a middleware.ParkingStore with nothing parked, for
// measuring what parking costs a message when no key is parked: the chain
// reads a partition's keys once, and then parks nothing.
type nothingParked struct{}

var errNothingParks = errors.New("benchmarks: this store parks nothing")

func (nothingParked) ParkedKeys(context.Context, string, string, int32) ([][]byte, error) {
	return nil, nil
}
func (nothingParked) Park(context.Context, *middleware.Parked) error { return errNothingParks }
func (nothingParked) ParkBehind(context.Context, *middleware.Parked) (bool, error) {
	return false, errNothingParks
}
func (nothingParked) Load(context.Context, string, string) (*middleware.Parked, bool, error) {
	return nil, false, nil
}
func (nothingParked) Release(context.Context, *middleware.Parked) error { return errNothingParks }

// allocsHandler returns the no-op handler wrapped as c says, and a function
// that closes what it opened.
func allocsHandler(c AllocsCase) (message.HandlerFunc, func(), error) {
	h := message.HandlerFunc(func(*message.Message) ([]*message.Message, error) { return nil, nil })
	if !c.Chain {
		return h, func() {}, nil
	}
	cfg, _, closeCfg := directConfig("allocs", c.Store)
	if c.Parking {
		cfg.DeadLetter.ConsumerGroup = func(*message.Message) string { return "allocs" }
		cfg.DeadLetter.Parking = middleware.ParkingConfig{Store: nothingParked{}, Delays: []time.Duration{time.Minute}}
	}
	chain, err := middleware.Defaults(cfg)
	if err != nil {
		closeCfg()
		return nil, nil, err
	}
	return wrap(h, chain.Middlewares()), func() { _ = chain.Close(context.Background()); closeCfg() }, nil
}

// directConfig is the middleware.Config of a chain called without Kafka
// or the router: dead letters, none expected, go to a gochannel Pub/Sub,
// logs nowhere; the idempotency scope is scope, and with store the store
// is a new idempotency.MemoryStore. closeAll closes the store and the
// Pub/Sub.
func directConfig(scope string, store bool) (cfg middleware.Config, mem *idempotency.MemoryStore, closeAll func()) {
	pub := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	cfg = middleware.Config{Publisher: pub, Logger: slog.New(slog.DiscardHandler)}
	cfg.Idempotency.Scope = func(*message.Message) string { return scope }
	if store {
		mem = idempotency.NewMemoryStore(0)
		cfg.Store = mem
	}
	return cfg, mem, func() {
		if mem != nil {
			_ = mem.Close()
		}
		_ = pub.Close()
	}
}

// wrap returns h wrapped in mws, the first outermost, as the router wraps
// a handler in its middlewares.
func wrap(h message.HandlerFunc, mws []message.HandlerMiddleware) message.HandlerFunc {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// AllocsResult is what one path allocates per message.
type AllocsResult struct {
	Case          AllocsCase
	Allocs, Bytes int64 // per message
}

// CompareAllocs measures every path of AllocsCases with testing.Benchmark
// (whose run time is the test.benchtime flag).
func CompareAllocs() ([]AllocsResult, error) {
	var out []AllocsResult
	for _, c := range AllocsCases() {
		r := testing.Benchmark(func(b *testing.B) { ConsumerAllocs(b, c) })
		if r.N == 0 {
			return out, errors.New(c.Name + ": the benchmark failed")
		}
		out = append(out, AllocsResult{Case: c, Allocs: r.AllocsPerOp(), Bytes: r.AllocedBytesPerOp()})
	}
	return out, nil
}
