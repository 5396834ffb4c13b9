package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/topics"
)

// EchoCommand is the request of the request/reply benchmark.
type EchoCommand struct {
	Data string `json:"data"`
}

// EchoReply is its result.
type EchoReply struct {
	Data string `json:"data"`
}

// ReqReply measures a cqrs request/reply round trip beside raw
// produce→consume round trips of the same payload size, on one broker.
//
// The raw round trip publishes one message with the broker package's
// publisher and waits until a subscriber of the broker package (in a
// consumer group) receives it. The ping-pong is two such hops back to back:
// an echo loop consumes the first topic and republishes each message to a
// second one, where the sender waits for it; it is the floor of any
// request/reply with these clients. The request/reply round trip is
// cqrs.Request: the command goes through a Service's command consumer on a
// Watermill router, with the default middleware, and its reply comes back
// on the dispatcher's reply subscription. All use one publisher.
type ReqReply struct {
	payload  string
	pub      message.Publisher
	raw      string
	rawMsgs  <-chan *message.Message
	ping     string
	pongMsgs <-chan *message.Message
	disp     *cqrs.CommandDispatcher
	closers  []func() error
}

// NewReqReply sets up the round trips on brokers, with payloads of
// payloadSize bytes, under names that start with prefix (a fresh prefix per
// set-up keeps runs on a shared cluster apart). Close it when done.
func NewReqReply(ctx context.Context, brokers []string, prefix string, payloadSize int) (_ *ReqReply, err error) {
	b := &ReqReply{payload: strings.Repeat("x", payloadSize)}
	defer func() {
		if err != nil {
			_ = b.Close()
		}
	}()
	bcfg := broker.Config{Brokers: brokers}
	pub, err := broker.NewPublisher(bcfg)
	if err != nil {
		return nil, err
	}
	b.pub = pub
	b.closers = append(b.closers, pub.Close)

	caller, handler := prefix+"-caller", prefix+"-handler"
	b.raw, b.ping = prefix+".raw", prefix+".ping"
	pong := prefix + ".pong"
	if err := broker.ProvisionTopics(ctx, bcfg, b.raw, b.ping, pong, cqrs.ReplyTopic(caller)); err != nil {
		return nil, err
	}
	if err := b.startRaw(bcfg, prefix, pong); err != nil {
		return nil, err
	}
	logger := slog.New(slog.DiscardHandler)
	if err := b.startHandler(ctx, bcfg, handler, logger); err != nil {
		return nil, err
	}
	if err := b.startDispatcher(ctx, bcfg, caller, handler, logger); err != nil {
		return nil, err
	}
	return b, nil
}

// startRaw subscribes to the raw and pong topics and starts the echo loop
// from the ping topic to pong.
func (b *ReqReply) startRaw(bcfg broker.Config, prefix, pong string) (err error) {
	subCtx, cancelSubs := context.WithCancel(context.Background())
	b.closers = append(b.closers, func() error { cancelSubs(); return nil })
	if b.rawMsgs, err = b.subscribe(subCtx, bcfg, prefix+".raw-consumer", b.raw); err != nil {
		return err
	}
	if b.pongMsgs, err = b.subscribe(subCtx, bcfg, prefix+".pong-consumer", pong); err != nil {
		return err
	}
	pingMsgs, err := b.subscribe(subCtx, bcfg, prefix+".ping-consumer", b.ping)
	if err != nil {
		return err
	}
	echoDone := make(chan struct{})
	go func() {
		defer close(echoDone)
		for msg := range pingMsgs {
			if err := b.pub.Publish(pong, message.NewMessage(msg.UUID, msg.Payload)); err != nil {
				msg.Nack()
				continue
			}
			msg.Ack()
		}
	}()
	b.closers = append(b.closers, func() error { cancelSubs(); <-echoDone; return nil })
	return nil
}

// startHandler runs the handling service: an echo command consumer on a
// router of its own.
func (b *ReqReply) startHandler(ctx context.Context, bcfg broker.Config, handler string, logger *slog.Logger) error {
	svc, err := cqrs.NewService(cqrs.ServiceConfig{
		Name: handler, Broker: bcfg, Publisher: b.pub, AutoProvisionTopics: true, Logger: logger,
	})
	if err != nil {
		return err
	}
	b.closers = append(b.closers, func() error { return svc.Close(context.Background()) })
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, watermill.NopLogger{})
	if err != nil {
		return err
	}
	err = svc.Register(ctx, router, cqrs.NewCommandConsumerWithResult(func(_ context.Context, cmd *EchoCommand) (EchoReply, error) {
		return EchoReply(*cmd), nil
	}))
	if err != nil {
		return err
	}
	routerDone := make(chan error, 1)
	go func() { routerDone <- router.Run(context.Background()) }()
	b.closers = append(b.closers, func() error { err := router.Close(); <-routerDone; return err })
	select {
	case <-router.Running():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startDispatcher starts the calling service's dispatcher, which sends
// EchoCommand to the handling service.
func (b *ReqReply) startDispatcher(ctx context.Context, bcfg broker.Config, caller, handler string, logger *slog.Logger) error {
	disp, err := cqrs.NewCommandDispatcher(b.pub, cqrs.CommandDispatcherConfig{
		Service: caller,
		Routes:  []cqrs.Route{cqrs.RouteOf[EchoCommand](topics.Command(handler, topics.TypeName(EchoCommand{})))},
		Broker:  bcfg,
		Logger:  logger,
	})
	if err != nil {
		return err
	}
	b.closers = append(b.closers, disp.Close)
	if err := disp.Start(ctx); err != nil {
		return err
	}
	b.disp = disp
	return nil
}

// subscribe subscribes to topic in group; the subscriber closes with b.
func (b *ReqReply) subscribe(ctx context.Context, cfg broker.Config, group, topic string) (<-chan *message.Message, error) {
	cfg.ConsumerGroup = group
	sub, err := broker.NewSubscriber(cfg)
	if err != nil {
		return nil, err
	}
	b.closers = append(b.closers, sub.Close)
	return sub.Subscribe(ctx, topic)
}

// RawRoundTrip publishes one message and waits until the subscriber has it.
func (b *ReqReply) RawRoundTrip(ctx context.Context) error {
	return b.publishAndWait(ctx, b.raw, b.rawMsgs)
}

// PingPong publishes one message and waits until its echo comes back: two
// raw hops.
func (b *ReqReply) PingPong(ctx context.Context) error {
	return b.publishAndWait(ctx, b.ping, b.pongMsgs)
}

func (b *ReqReply) publishAndWait(ctx context.Context, topic string, msgs <-chan *message.Message) error {
	msg := message.NewMessage(watermill.NewUUID(), []byte(b.payload))
	if err := b.pub.Publish(topic, msg); err != nil {
		return err
	}
	for {
		select {
		case got, ok := <-msgs:
			if !ok {
				return errors.New("subscription closed")
			}
			got.Ack()
			if got.UUID == msg.UUID {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// RequestReply sends one request and waits for its reply.
func (b *ReqReply) RequestReply(ctx context.Context) error {
	res, err := cqrs.Request[EchoReply](ctx, b.disp, EchoCommand{Data: b.payload})
	if err != nil {
		return err
	}
	if len(res.Data) != len(b.payload) {
		return fmt.Errorf("reply of %d bytes, want %d", len(res.Data), len(b.payload))
	}
	return nil
}

// Close stops everything NewReqReply started, last started first.
func (b *ReqReply) Close() error {
	var errs []error
	for i := len(b.closers) - 1; i >= 0; i-- {
		errs = append(errs, b.closers[i]())
	}
	b.closers = nil
	return errors.Join(errs...)
}

// Latency summarises durations of one kind: round trips, marks.
type Latency struct {
	Median, Mean, P90, P99 time.Duration
}

// ReqReplyResult is what MeasureReqReply found. Durations are per round
// trip; the ratios are of the medians.
type ReqReplyResult struct {
	Rounds                    int
	Raw, PingPong, Reply      Latency
	PingPongRatio, ReplyRatio float64 // over Raw
	ReplyHopsRatio            float64 // Reply over PingPong, two raw hops
}

// MeasureReqReply runs warmup rounds, then rounds of one raw round trip, one
// ping-pong and one request/reply, in a rotating order, so that all see the
// same machine noise, and reports their latencies and the ratios of the
// medians to the raw one.
func MeasureReqReply(ctx context.Context, b *ReqReply, warmup, rounds int) (ReqReplyResult, error) {
	kinds := []struct {
		name string
		run  func(context.Context) error
	}{{"raw", b.RawRoundTrip}, {"ping-pong", b.PingPong}, {"request/reply", b.RequestReply}}
	for range warmup {
		for _, k := range kinds {
			if err := k.run(ctx); err != nil {
				return ReqReplyResult{}, fmt.Errorf("%s warm-up: %w", k.name, err)
			}
		}
	}
	samples := make([][]time.Duration, len(kinds))
	for round := range rounds {
		for j := range kinds {
			// Rotate which kind goes first, so that none always runs
			// right after another's leftover work.
			i := (j + round) % len(kinds)
			k := kinds[i]
			start := time.Now()
			if err := k.run(ctx); err != nil {
				return ReqReplyResult{}, fmt.Errorf("%s: %w", k.name, err)
			}
			samples[i] = append(samples[i], time.Since(start))
		}
	}
	r := ReqReplyResult{Rounds: rounds, Raw: summarise(samples[0]), PingPong: summarise(samples[1]), Reply: summarise(samples[2])}
	if r.Raw.Median > 0 {
		r.PingPongRatio = float64(r.PingPong.Median) / float64(r.Raw.Median)
		r.ReplyRatio = float64(r.Reply.Median) / float64(r.Raw.Median)
	}
	if r.PingPong.Median > 0 {
		r.ReplyHopsRatio = float64(r.Reply.Median) / float64(r.PingPong.Median)
	}
	return r, nil
}

func summarise(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Latency{Median: s[len(s)/2], Mean: sum / time.Duration(len(s)), P90: s[len(s)*9/10], P99: s[len(s)*99/100]}
}
