package cqrs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	wcqrs "github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/ThreeDotsLabs/watermill/components/requestreply"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/telemetry"
	"github.com/koto-dev/watermill-koto/topics"
)

// DefaultTimeout is how long a Request waits for its reply when neither
// CommandDispatcherConfig.Timeout nor the context sets a deadline, as Koto's
// RequestReplyTimeout.
const DefaultTimeout = 10 * time.Second

// ReplyTopic returns the conventional reply topic of a service,
// "{service}.replies".
func ReplyTopic(service string) string {
	return service + ".replies"
}

// CommandDispatcherConfig configures a CommandDispatcher.
type CommandDispatcherConfig struct {
	// Service is the name of the sending service. Required.
	Service string

	// Routes send each command type to the topic of the service that
	// handles it. A command without a route cannot be sent (ErrNoRoute).
	// The handling service's convention is topics.Command(handling
	// service, topics.TypeName(command)), which is where a command consumer
	// listens by default.
	Routes []Route

	// Timeout is how long Request waits for a reply when its context has
	// no deadline. A context deadline, earlier or later, takes precedence.
	// Default: DefaultTimeout.
	Timeout time.Duration

	// ReplyTopic is the topic replies come back on. Default:
	// ReplyTopic(Service). All instances of a service may share it: each
	// reads it whole, without a consumer group, and keeps only the replies
	// to its own requests.
	ReplyTopic string

	// Broker is where replies are read and, with AutoProvisionTopics, the
	// reply topic is created (with Broker.Provision's settings). Brokers
	// is required; ConsumerGroup and InitialOffset are ignored, since
	// replies are read without a group from the newest offset.
	Broker broker.Config

	// AutoProvisionTopics makes Start create the reply topic if it does
	// not exist.
	AutoProvisionTopics bool

	// Logger receives the dispatcher's logs. Default: slog.Default().
	Logger *slog.Logger

	// Telemetry traces and measures the commands sent and the
	// request/replies. Nil: OpenTelemetry's global providers.
	Telemetry *telemetry.Telemetry
}

func (c *CommandDispatcherConfig) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.ReplyTopic == "" && c.Service != "" {
		c.ReplyTopic = ReplyTopic(c.Service)
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
}

// Validate reports what is wrong with the configuration, zero fields
// counting as their defaults. Errors wrap ErrInvalidConfig, or
// ErrInvalidRoute for a bad route or reply topic.
func (c CommandDispatcherConfig) Validate() error {
	c.setDefaults()
	if err := validateService(c.Service, c.Routes); err != nil {
		return err
	}
	if c.Timeout < 0 {
		return fmt.Errorf("%w: Timeout is negative (%s)", ErrInvalidConfig, c.Timeout)
	}
	if err := topics.Validate(c.ReplyTopic); err != nil {
		return fmt.Errorf("%w: ReplyTopic: %w", ErrInvalidRoute, err)
	}
	return validateBroker(c.Broker)
}

// CommandDispatcher sends commands, Koto's IntegrationCommandDispatcher:
// fire-and-forget with Send, or waiting for the handler's reply with Request.
// Request needs Start, which opens the one reply subscription the
// dispatcher keeps until Close. It is safe for concurrent use.
type CommandDispatcher struct {
	cfg    CommandDispatcherConfig
	tel    *telemetry.Telemetry
	bus    *wcqrs.CommandBus
	routes map[string]string
	logger *slog.Logger

	replies *broker.TailReader

	mu      sync.Mutex
	state   dispatcherState
	pending map[string]chan *message.Message
	closing chan struct{} // closed by Close
}

type dispatcherState int

const (
	dispatcherNew dispatcherState = iota
	dispatcherStarted
	dispatcherClosed
)

// NewCommandDispatcher returns a dispatcher that sends commands through pub,
// typically a broker.NewPublisher. It does not connect for replies until
// Start.
func NewCommandDispatcher(pub message.Publisher, cfg CommandDispatcherConfig) (*CommandDispatcher, error) {
	if pub == nil {
		return nil, fmt.Errorf("%w: publisher is nil", ErrInvalidConfig)
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	routes, _ := routeTable(cfg.Routes)
	tel, err := telemetryOf(cfg.Telemetry)
	if err != nil {
		return nil, err
	}
	pub = tel.Publisher(pub)
	d := &CommandDispatcher{
		cfg:     cfg,
		tel:     tel,
		routes:  routes,
		logger:  cfg.Logger.With("service", cfg.Service, "reply_topic", cfg.ReplyTopic),
		pending: make(map[string]chan *message.Message),
		closing: make(chan struct{}),
	}
	bus, err := wcqrs.NewCommandBusWithConfig(pub, wcqrs.CommandBusConfig{
		GeneratePublishTopic: func(params wcqrs.CommandBusGeneratePublishTopicParams) (string, error) {
			topic, ok := d.routes[params.CommandName]
			if !ok {
				return "", fmt.Errorf("%w %s; add cqrs.RouteOf[%T](topic) to CommandDispatcherConfig.Routes",
					ErrNoRoute, params.CommandName, params.Command)
			}
			return topic, nil
		},
		OnSend: func(params wcqrs.CommandBusOnSendParams) error {
			stampCorrelation(params.Message)
			return nil
		},
		Marshaler: marshaler{},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	d.bus = bus
	d.replies, err = broker.NewTailReader(cfg.Broker, cfg.ReplyTopic, d.deliver, watermillLogger(d.logger))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return d, nil
}

// ReplyTopic returns the topic this dispatcher reads replies from.
func (d *CommandDispatcher) ReplyTopic() string { return d.cfg.ReplyTopic }

// Start opens the reply subscription: it reads every partition of the
// reply topic from its newest offset, without a consumer group, and returns
// once it does. Replies to requests sent after Start returns cannot be
// missed. The reply topic must exist, be created by AutoProvisionTopics, or
// be auto-created by the cluster; partitions added to it later are not
// read until the dispatcher is restarted.
//
// The subscription runs until Close. ctx bounds only the start. A second
// Start returns ErrAlreadyStarted, a Start after Close ErrClosed.
func (d *CommandDispatcher) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.cfg.AutoProvisionTopics {
		if err := broker.ProvisionTopics(ctx, d.cfg.Broker, d.cfg.ReplyTopic); err != nil {
			return fmt.Errorf("cqrs: provisioning the reply topic: %w", err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch d.state {
	case dispatcherStarted:
		return ErrAlreadyStarted
	case dispatcherClosed:
		return ErrClosed
	}
	if err := d.replies.Start(ctx); err != nil {
		return fmt.Errorf("cqrs: subscribing to replies on %s: %w", d.cfg.ReplyTopic, err)
	}
	d.state = dispatcherStarted
	return nil
}

// Close stops the reply subscription and fails the requests still waiting
// with ErrClosed. It does not close the publisher. Calling it twice is fine.
func (d *CommandDispatcher) Close() error {
	d.mu.Lock()
	prev := d.state
	d.state = dispatcherClosed
	d.mu.Unlock()
	if prev == dispatcherClosed {
		return nil
	}
	close(d.closing)
	return d.replies.Close()
}

// deliver hands a reply to the request that waits for it, or drops it: a
// reply to another instance, a reply that came after its request gave up,
// or a second reply to one request.
func (d *CommandDispatcher) deliver(msg *message.Message) {
	op := msg.Metadata.Get(OperationIDMetadataKey)
	d.mu.Lock()
	ch, ok := d.pending[op]
	d.mu.Unlock()
	if !ok {
		d.logger.Debug("dropping a reply no request of this instance waits for", "operation_id", op)
		return
	}
	select {
	case ch <- msg:
	default:
		d.logger.Debug("dropping a duplicate reply", "operation_id", op)
	}
}

// Send publishes cmd to its routed topic and returns once it is published;
// it waits for no handler. The message carries the command as JSON, its
// type name, a UUIDv7 (or the MessageIDer ID), the partition key of a
// PartitionKeyer, and the correlation ID of ctx, or a new one.
//
// An error of the publisher is wrapped, as EventPublisher.Publish's.
func (d *CommandDispatcher) Send(ctx context.Context, cmd any) error {
	if cmd == nil {
		return errors.New("cqrs: Send of a nil command")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, _ = correlation.Ensure(ctx)
	if err := d.bus.Send(ctx, cmd); err != nil {
		return fmt.Errorf("cqrs: sending %s: %w", topics.TypeName(cmd), err)
	}
	return nil
}

// Request sends cmd as a request and waits for its handler's reply, which it
// decodes into a new R. Use struct{} for R when the handler returns no
// result.
//
// The wait ends at the deadline of ctx when ctx has one, otherwise after the
// dispatcher's Timeout; the error then matches ErrTimeout (and
// context.DeadlineExceeded). When the handler returns an error, the error
// wraps a *HandlerError with the handler's message and kind. A cancelled ctx
// returns context.Canceled; a closed dispatcher ErrClosed; an error of the
// publisher is wrapped, as Send's.
func Request[R any](ctx context.Context, d *CommandDispatcher, cmd any) (R, error) {
	var result R
	name := topics.TypeName(cmd)
	reply, err := d.observedRequest(ctx, name, cmd)
	if err != nil {
		return result, err
	}
	if reply.Metadata.Get(requestreply.HasErrorMetadataKey) == "1" {
		herr := &HandlerError{
			Kind:    reply.Metadata.Get(ErrorKindMetadataKey),
			Message: reply.Metadata.Get(requestreply.ErrorMetadataKey),
		}
		if herr.Kind == "" {
			herr.Kind = KindInternal
		}
		return result, fmt.Errorf("cqrs: %s failed: %w", name, herr)
	}
	if len(reply.Payload) > 0 {
		if err := json.Unmarshal(reply.Payload, &result); err != nil {
			return result, fmt.Errorf("cqrs: decoding the reply to %s as %T: %w", name, result, err)
		}
	}
	return result, nil
}

// request sends cmd with a new operation ID and waits for the reply message.
func (d *CommandDispatcher) request(ctx context.Context, name string, cmd any) (*message.Message, error) {
	if cmd == nil {
		return nil, errors.New("cqrs: Request of a nil command")
	}
	ctx, cancel := d.withTimeout(ctx)
	defer cancel()
	deadline, _ := ctx.Deadline()
	wait := time.Until(deadline)
	if err := ctx.Err(); err != nil {
		return nil, waitError(name, "(not sent)", wait, err)
	}
	ctx, _ = correlation.Ensure(ctx)
	op := newMessageID()
	replies, err := d.await(op)
	if err != nil {
		return nil, err
	}
	defer d.forget(op)
	if err := d.sendRequest(ctx, cmd, op); err != nil {
		return nil, fmt.Errorf("cqrs: sending %s: %w", name, err)
	}
	select {
	case reply := <-replies:
		return reply, nil
	case <-ctx.Done():
		return nil, waitError(name, op, wait, ctx.Err())
	case <-d.closing:
		return nil, fmt.Errorf("cqrs: waiting for the reply to %s: %w", name, ErrClosed)
	}
}

// sendRequest sends cmd as the request op, to be replied on the reply
// topic.
func (d *CommandDispatcher) sendRequest(ctx context.Context, cmd any, op string) error {
	return d.bus.SendWithModifiedMessage(ctx, cmd, func(msg *message.Message) error {
		msg.Metadata.Set(OperationIDMetadataKey, op)
		msg.Metadata.Set(ReplyToMetadataKey, d.cfg.ReplyTopic)
		return nil
	})
}

// withTimeout gives ctx the dispatcher's Timeout, unless it has a deadline.
func (d *CommandDispatcher) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d.cfg.Timeout)
}

// await registers a request that waits for the reply to op, and returns
// the channel the reply will come on.
func (d *CommandDispatcher) await(op string) (<-chan *message.Message, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch d.state {
	case dispatcherNew:
		return nil, ErrNotStarted
	case dispatcherClosed:
		return nil, ErrClosed
	}
	ch := make(chan *message.Message, 1)
	d.pending[op] = ch
	return ch, nil
}

// forget drops the request waiting for op: a reply from now on is late.
func (d *CommandDispatcher) forget(op string) {
	d.mu.Lock()
	delete(d.pending, op)
	d.mu.Unlock()
}

// waitError is the error of a request whose context ended; wait is how
// long the request could wait.
func waitError(name, op string, wait time.Duration, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s (operation %s) got no reply within %s: %w",
			ErrTimeout, name, op, wait.Round(time.Millisecond), err)
	}
	return fmt.Errorf("cqrs: waiting for the reply to %s: %w", name, err)
}
