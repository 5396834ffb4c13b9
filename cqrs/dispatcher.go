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

	"github.com/koto-dev/watermill-koto/internal/config"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/components/requestreply"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/telemetry"
	"github.com/koto-dev/watermill-koto/topics"
)

// defaultTimeout is the longest a Request, Send or Publish takes when its
// configuration sets no Timeout.
const defaultTimeout = 10 * time.Second

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

	// Timeout is the longest a Request (sending the command and waiting
	// for its reply) or a Send takes (see the package doc). Default:
	// 10s.
	Timeout time.Duration

	// ReplyTopic is the topic replies come back on. Default:
	// [ReplyTopic](Service). All instances of a service may share it: each
	// reads it whole, without a consumer group, and keeps only the replies
	// to its own requests.
	ReplyTopic string

	// Broker is where replies are read and, with AutoProvisionTopics, the
	// reply topic is created (with Broker.Provision's settings). Brokers
	// is required; ConsumerGroup and InitialOffset are ignored, since
	// replies are read without a group from the newest offset;
	// ReconnectRetrySleep spaces the attempts to resume reading them after
	// a fault.
	Broker broker.Config

	// AutoProvisionTopics makes Start create the reply topic if it does
	// not exist.
	AutoProvisionTopics bool

	// Logger receives the dispatcher's logs. Default: slog.Default().
	Logger *slog.Logger

	// Telemetry traces and measures the commands sent and the
	// request/replies. Nil: OpenTelemetry's global providers.
	Telemetry *telemetry.Telemetry

	// requestPublisher, set by DurableOutbox.CommandDispatcher, publishes
	// the commands of Request directly: a request waits for its reply,
	// which could not come before an outbox transaction commits.
	requestPublisher message.Publisher
}

func (c *CommandDispatcherConfig) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	if c.ReplyTopic == "" && c.Service != "" {
		c.ReplyTopic = ReplyTopic(c.Service)
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
}

// Validate reports every problem of the configuration, zero fields
// counting as their defaults, Broker included, in one error that wraps
// koto.ErrInvalidConfig (and [ErrInvalidRoute] for a bad route or reply
// topic).
func (c CommandDispatcherConfig) Validate() error {
	c.setDefaults()
	p := config.For("cqrs.CommandDispatcherConfig")
	validateService(p, "Service", c.Service, c.Routes)
	validateTimeout(p, c.Timeout)
	if err := topics.Validate(c.ReplyTopic); c.Service != "" && err != nil {
		p.Add("ReplyTopic", "%w: %w", ErrInvalidRoute, err)
	}
	p.Nest("Broker", c.Broker.Validate())
	return p.Err()
}

// CommandDispatcher sends commands: fire-and-forget with Send, or waiting
// for the handler's reply with [Request], which needs Start (see Commands
// and request/reply in the package doc). It is safe for concurrent use.
type CommandDispatcher struct {
	cfg      CommandDispatcherConfig
	tel      *telemetry.Telemetry
	enc      encoder
	pub      message.Publisher // Send's
	sched    scheduler         // nil unless Send's publisher schedules
	requests message.Publisher // Request's: pub, or requestPublisher
	routes   map[string]string
	logger   *slog.Logger

	replies *broker.TailReader

	life context.Context // ends at Close, and every call under way with it
	stop context.CancelFunc

	mu      sync.Mutex
	state   dispatcherState
	startup *startup // of the Start under way or the last one
	pending map[string]chan *message.Message
}

type dispatcherState int

const (
	dispatcherNew dispatcherState = iota
	dispatcherStarting
	dispatcherStarted
	dispatcherClosed
)

// startup is one Start: done closes when it ends, with err.
type startup struct {
	done chan struct{}
	err  error
}

// NewCommandDispatcher returns a dispatcher that sends commands through pub,
// typically a broker.NewPublisher. It does not connect for replies until
// Start.
func NewCommandDispatcher(pub message.Publisher, cfg CommandDispatcherConfig) (*CommandDispatcher, error) {
	if pub == nil {
		return nil, errNilPublisher
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
	d := &CommandDispatcher{
		cfg:     cfg,
		tel:     tel,
		routes:  routes,
		logger:  cfg.Logger.With("service", cfg.Service, "reply_topic", cfg.ReplyTopic),
		pending: make(map[string]chan *message.Message),
	}
	d.life, d.stop = context.WithCancel(context.Background())
	d.sched = schedulerOf(pub)
	pub = tel.Publisher(pub)
	d.pub, d.requests = pub, pub
	if cfg.requestPublisher != nil {
		d.requests = tel.Publisher(cfg.requestPublisher)
	}
	readerCfg := cfg.Broker
	readerCfg.Logger = cmp.Or(readerCfg.Logger, d.logger)
	d.replies, err = broker.NewTailReader(readerCfg, cfg.ReplyTopic, d.deliver)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// publish publishes cmd, whose type name is name, to its route through
// pub; modify, when not nil, adds to its message first.
func (d *CommandDispatcher) publish(ctx context.Context, pub message.Publisher, cmd any, name string, modify func(*message.Message)) error {
	if name == "" {
		return errNoTypeName(cmd)
	}
	topic, ok := d.routes[name]
	if !ok {
		return fmt.Errorf("%w %s; add cqrs.RouteOf[%T](topic) to CommandDispatcherConfig.Routes", ErrNoRoute, name, cmd)
	}
	return d.enc.publish(ctx, pub, topic, cmd, name, modify)
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
// The subscription runs until Close. ctx bounds only the start. Start
// blocks neither Request, which waits for it until its own deadline, nor
// Close, which ends it. A Start that fails may be called again; a second
// Start of a started dispatcher is an error, a Start after or during Close
// ErrClosed.
func (d *CommandDispatcher) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	switch d.state {
	case dispatcherStarting, dispatcherStarted:
		d.mu.Unlock()
		return errAlreadyStarted
	case dispatcherClosed:
		d.mu.Unlock()
		return ErrClosed
	}
	s := &startup{done: make(chan struct{})}
	d.state, d.startup = dispatcherStarting, s
	d.mu.Unlock()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(d.life, func() { cancel(ErrClosed) })()
	err := d.start(ctx)

	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.state == dispatcherClosed:
		err = fmt.Errorf("cqrs: starting: %w", ErrClosed)
	case err != nil:
		d.state = dispatcherNew
	default:
		d.state = dispatcherStarted
	}
	s.err = err
	close(s.done)
	return err
}

// start provisions the reply topic if configured, and starts reading it.
func (d *CommandDispatcher) start(ctx context.Context) error {
	if d.cfg.AutoProvisionTopics {
		if err := broker.ProvisionTopics(ctx, d.cfg.Broker, d.cfg.ReplyTopic); err != nil {
			return fmt.Errorf("cqrs: provisioning the reply topic: %w", err)
		}
	}
	if err := d.replies.Start(ctx); err != nil {
		return fmt.Errorf("cqrs: subscribing to replies on %s: %w", d.cfg.ReplyTopic, err)
	}
	return nil
}

// Err returns nil when a Request can be sent now, and otherwise why not:
// ErrNotStarted, ErrClosed, or, while the reply subscription cannot read
// the reply topic, an error that wraps broker.ErrReaderDown and its cause.
// It suits a health check.
func (d *CommandDispatcher) Err() error {
	d.mu.Lock()
	state := d.state
	d.mu.Unlock()
	switch state {
	case dispatcherNew, dispatcherStarting:
		return ErrNotStarted
	case dispatcherClosed:
		return ErrClosed
	}
	return d.replies.Err()
}

// Close stops the reply subscription, or the Start under way, and ends
// every Request and Send under way with ErrClosed, even those still
// sending. It does not close the publisher. Calling it twice is fine.
func (d *CommandDispatcher) Close() error {
	d.mu.Lock()
	prev := d.state
	d.state = dispatcherClosed
	d.mu.Unlock()
	if prev == dispatcherClosed {
		return nil
	}
	d.stop()
	return d.replies.Close()
}

// deliver hands a reply to the request that waits for it, or drops it: a
// reply to another instance, a reply that came after its request gave up,
// or a second reply to one request.
func (d *CommandDispatcher) deliver(msg *message.Message) {
	op := msg.Metadata.Get(operationIDKey)
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
// it waits for no handler and needs no Start. Its message, deadline and
// errors are those of [EventPublisher.Publish]; Close ends it with
// [ErrClosed].
func (d *CommandDispatcher) Send(ctx context.Context, cmd any) error {
	return d.send(ctx, d.pub, verbSend, cmd)
}

// SendAt schedules cmd to be sent at at, through the outbox it is written
// into, in the transaction of ctx as Send writes (see Scheduled messages
// in the package doc), and returns the schedule's ID for
// [CommandDispatcher.Cancel]. A time already past is due at once; the
// zero time is an error wrapping outbox.ErrInvalidSchedule. A dispatcher
// whose publisher is not an outbox's returns [ErrCannotSchedule].
func (d *CommandDispatcher) SendAt(ctx context.Context, at time.Time, cmd any) (string, error) {
	if d.sched == nil {
		return "", ErrCannotSchedule
	}
	s := &scheduling{s: d.sched, at: at}
	err := d.send(ctx, d.tel.Publisher(s), verbSendAt, cmd)
	return s.id, err
}

// SendAfter is [CommandDispatcher.SendAt] delay from now; a negative delay
// is an error wrapping outbox.ErrInvalidSchedule.
func (d *CommandDispatcher) SendAfter(ctx context.Context, delay time.Duration, cmd any) (string, error) {
	at, err := after(delay)
	if err != nil {
		return "", err
	}
	return d.SendAt(ctx, at, cmd)
}

// Cancel cancels the scheduled command id in the transaction of ctx, as
// outbox.Publisher's Cancel does: once that commits, the command is never
// sent. The error of a command no longer scheduled wraps outbox.ErrSent,
// outbox.ErrCancelled or outbox.ErrUnknownSchedule.
func (d *CommandDispatcher) Cancel(ctx context.Context, id string) error {
	return cancel(ctx, d.sched, id)
}

// send sends cmd through pub; v names the call in errors.
func (d *CommandDispatcher) send(ctx context.Context, pub message.Publisher, v verb, cmd any) error {
	if cmd == nil {
		return fmt.Errorf("cqrs: %s of a nil command", v.call)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	name := d.enc.name(cmd)
	if d.life.Err() != nil {
		return fmt.Errorf("cqrs: %s %s: %w", v.doing, name, ErrClosed)
	}
	ctx, budget, cancel := callContext(ctx, d.cfg.Timeout, d.life)
	defer cancel()
	ctx, _ = correlation.Ensure(ctx)
	if err := d.publish(ctx, pub, cmd, name, nil); err != nil {
		return failed(ctx, err, v.doing+" "+name,
			fmt.Sprintf("%s not %s within %s; it may still reach its handler", name, v.done, round(budget)))
	}
	return nil
}

// Request sends cmd as a request and waits for its handler's reply, which it
// decodes into a new R (struct{} when the handler returns no result). A
// handler's error comes back wrapping a [*HandlerError]. The package doc
// (Deadlines and broker faults) says how Request ends when the broker, the
// handler or the caller's deadline do not cooperate.
func Request[R any](ctx context.Context, d *CommandDispatcher, cmd any) (R, error) {
	var result R
	if cmd == nil {
		return result, errors.New("cqrs: Request of a nil command")
	}
	name := d.enc.name(cmd)
	reply, err := d.observedRequest(ctx, name, cmd)
	if err != nil {
		return result, err
	}
	return decodeReply[R](name, reply)
}

// decodeReply returns the result or the handler error that reply carries.
func decodeReply[R any](name string, reply *message.Message) (R, error) {
	var result R
	if reply.Metadata.Get(requestreply.HasErrorMetadataKey) == "1" {
		herr := &HandlerError{
			Kind:    reply.Metadata.Get(errorKindKey),
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
	ctx, budget, cancel := callContext(ctx, d.cfg.Timeout, d.life)
	defer cancel()
	if ctx.Err() != nil {
		return nil, ended(ctx, "sending "+name, fmt.Sprintf("%s not sent: no time left", name))
	}
	ctx, _ = correlation.Ensure(ctx)
	op := newMessageID()
	replies, err := d.await(ctx, name, op, budget)
	if err != nil {
		return nil, err
	}
	defer d.forget(op)
	if err := d.sendRequest(ctx, cmd, name, op); err != nil {
		return nil, failed(ctx, err, "sending "+name, fmt.Sprintf("%s (operation %s) not sent within %s; "+
			"it may still reach its handler, whose late reply is then dropped", name, op, round(budget)))
	}
	select {
	case reply := <-replies:
		return reply, nil
	case <-ctx.Done():
		late := fmt.Sprintf("%s (operation %s) got no reply within %s", name, op, round(budget))
		if err := d.replies.Err(); err != nil {
			late += fmt.Sprintf(" (%v)", err)
		}
		return nil, ended(ctx, "waiting for the reply to "+name, late)
	}
}

// sendRequest sends cmd as the request op, to be replied on the reply
// topic.
func (d *CommandDispatcher) sendRequest(ctx context.Context, cmd any, name, op string) error {
	return d.publish(ctx, d.requests, cmd, name, func(msg *message.Message) {
		msg.Metadata.Set(operationIDKey, op)
		msg.Metadata.Set(replyToKey, d.cfg.ReplyTopic)
	})
}

// await registers a request that waits for the reply to op, and returns
// the channel the reply will come on. During Start it waits for the start
// to end, until ctx does.
func (d *CommandDispatcher) await(ctx context.Context, name, op string, budget time.Duration) (<-chan *message.Message, error) {
	var waited *startup
	for {
		replies, starting, err := d.register(name, op, waited)
		if starting == nil {
			return replies, err
		}
		select {
		case <-starting.done:
			waited = starting
		case <-ctx.Done():
			return nil, ended(ctx, "sending "+name, fmt.Sprintf("%s not sent: the dispatcher did not finish starting within %s: %v",
				name, round(budget), ErrNotStarted))
		}
	}
}

// register registers op when the dispatcher is started and its replies can
// be read. During a Start it returns that start, to wait for; waited is the
// start that the caller waited for, if any.
func (d *CommandDispatcher) register(name, op string, waited *startup) (chan *message.Message, *startup, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch d.state {
	case dispatcherClosed:
		return nil, nil, ErrClosed
	case dispatcherNew:
		if waited != nil {
			return nil, nil, fmt.Errorf("%w: %s not sent: the start failed: %w", ErrNotStarted, name, waited.err)
		}
		return nil, nil, ErrNotStarted
	case dispatcherStarting:
		return nil, d.startup, nil
	}
	if err := d.replies.Err(); err != nil {
		return nil, nil, koto.Outage(fmt.Errorf("cqrs: %s not sent: replies cannot be read: %w", name, err))
	}
	ch := make(chan *message.Message, 1)
	d.pending[op] = ch
	return ch, nil, nil
}

// forget drops the request waiting for op: a reply from now on is late.
func (d *CommandDispatcher) forget(op string) {
	d.mu.Lock()
	delete(d.pending, op)
	d.mu.Unlock()
}
