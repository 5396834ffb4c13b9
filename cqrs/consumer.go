package cqrs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	koto "github.com/koto-dev/watermill-koto"

	wcqrs "github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/internal/logattr"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// Consumer is a typed message handler that a Service registers on a router.
// Build one with NewEventConsumer, NewCommandConsumer or
// NewCommandConsumerWithResult.
type Consumer interface {
	// TypeName is the name of the message type the consumer handles,
	// topics.TypeName of it.
	TypeName() string

	spec() *consumerSpec
}

// ConsumerOption changes how a Service registers a Consumer.
type ConsumerOption func(*consumerOptions)

type consumerOptions struct {
	from       string
	topic      string
	group      string
	idempotent *bool
	skipOthers bool
	lockKeys   func(*message.Message) ([]string, error)
	scope      *string
	batch      *middleware.BatchConfig
}

// From names the service that publishes the events an event consumer
// handles: the consumer subscribes to topics.Event(service, type name),
// "orders.order-placed" for From("orders"). An event consumer needs From or
// Topic. Command consumers listen on their own service's topic and reject
// From.
func From(service string) ConsumerOption {
	return func(o *consumerOptions) { o.from = service }
}

// Topic subscribes the consumer to an explicit topic instead of the
// conventional one, the consuming side of a Route.
func Topic(topic string) ConsumerOption {
	return func(o *consumerOptions) { o.topic = topic }
}

// ConsumerGroup replaces the consumer group (and handler name) of a
// consumer, topics.ConsumerGroup(service, type name) by default. Two
// consumers of one type in one service need different groups.
func ConsumerGroup(group string) ConsumerOption {
	return func(o *consumerOptions) { o.group = group }
}

// Idempotent turns deduplication by message ID on or off. Event consumers
// are idempotent by default, command consumers are not. A request that an
// idempotent command consumer skips as a duplicate gets no reply: its
// sender times out.
func Idempotent(on bool) ConsumerOption {
	return func(o *consumerOptions) { o.idempotent = &on }
}

// SkipOtherTypes makes the consumer ack, with a debug log line, the
// messages whose type name (koto.TypeNameMetadataKey) is another type's: for a
// topic that carries several types, each read by its own consumer.
// Without it such a message is poison, dead-lettered at once with an error
// that wraps ErrUnexpectedType and names both types. A message without a
// type name, from a producer that does not set one, is handled either way.
func SkipOtherTypes() ConsumerOption {
	return func(o *consumerOptions) { o.skipOthers = true }
}

// LockKeys gives a consumer of a transactional Service with an outbox the
// keys to lock before its transaction's first write: the partition keys of
// the messages it publishes through the outbox, which then reach Kafka in
// the order their transactions commit (see middleware.IdempotencyConfig's
// LockKeys; Outbox.LockKeys inside the handler comes too late and is
// refused). keys gets the incoming message: its partition_key metadata
// (koto.PartitionKeyMetadataKey), say, when the consumer's events share
// the aggregate of the one it handles.
func LockKeys(keys func(msg *message.Message) ([]string, error)) ConsumerOption {
	return func(o *consumerOptions) { o.lockKeys = keys }
}

// IdempotencyScope sets the scope under which an idempotent consumer
// stores its marks (middleware.IdempotencyConfig's Scope), its consumer
// group by default. The empty scope stores the bare message ID, as a .NET
// Koto consumer stores the envelope ID: a Go and a .NET consumer on one
// processed_messages table then skip each other's messages. Use it only
// for a consumer that takes over a .NET consumer's work; two consumers of
// one message with the same scope skip each other's.
func IdempotencyScope(scope string) ConsumerOption {
	return func(o *consumerOptions) { o.scope = &scope }
}

type consumerKind int

const (
	eventKind consumerKind = iota
	commandKind
)

func (k consumerKind) String() string {
	if k == commandKind {
		return "command"
	}
	return "event"
}

// consumerSpec is what every Consumer is.
type consumerSpec struct {
	kind     consumerKind
	typeName string
	goType   string
	opts     consumerOptions
	// handle handles one message; env is the registration's.
	handle func(msg *message.Message, env *handlerEnv) error
	// A batch consumer has prepare, which checks and decodes a message
	// before it joins a batch (skip acks it as it is), and handleBatch.
	prepare     func(msg *message.Message, env *handlerEnv) (skip bool, err error)
	handleBatch middleware.BatchHandlerFunc
}

// batched reports whether s is a batch consumer.
func (s *consumerSpec) batched() bool { return s.handleBatch != nil }

func (s *consumerSpec) TypeName() string    { return s.typeName }
func (s *consumerSpec) spec() *consumerSpec { return s }

// handlerEnv is what a registered consumer needs from its Service.
type handlerEnv struct {
	handlerName   string
	pub           message.Publisher // replies
	backoff       koto.Backoff      // spaces the retries of a failed reply
	logger        *slog.Logger
	transactional bool // the consumer runs in the transactional mode
}

func newSpec[T any](kind consumerKind, opts []ConsumerOption) *consumerSpec {
	s := &consumerSpec{kind: kind, typeName: topics.TypeName(new(T)), goType: fmt.Sprintf("%T", new(T))[1:]}
	for _, opt := range opts {
		opt(&s.opts)
	}
	return s
}

// NewEventConsumer returns a Consumer of events of type T: handle gets each
// event decoded from JSON. Give the producing service with [From], or the
// topic with [Topic]. Registered on a Service, it is idempotent by default;
// the package doc (Consumers) says what becomes of its messages and
// errors.
func NewEventConsumer[T any](handle func(ctx context.Context, ev *T) error, opts ...ConsumerOption) Consumer {
	s := newSpec[T](eventKind, opts)
	s.handle = func(msg *message.Message, env *handlerEnv) error {
		if skip, err := s.checkType(msg, env); skip || err != nil {
			return err
		}
		ev := new(T)
		if err := json.Unmarshal(msg.Payload, ev); err != nil {
			return koto.Poison(fmt.Errorf("cqrs: decoding %s: %w", s.typeName, err))
		}
		return handle(wcqrs.CtxWithOriginalMessage(msg.Context(), msg), ev)
	}
	return s
}

// checkType accepts msg when its type name metadata is the consumer's or
// absent (a producer that does not set it). A message of another type is
// poison, or, with SkipOtherTypes, skipped: checkType logs it and reports
// skip.
func (s *consumerSpec) checkType(msg *message.Message, env *handlerEnv) (skip bool, err error) {
	name := msg.Metadata.Get(koto.TypeNameMetadataKey)
	switch {
	case name == "" || name == s.typeName:
		return false, nil
	case !s.opts.skipOthers:
		return false, koto.Poison(fmt.Errorf("%w: got %q, want %q; add cqrs.SkipOtherTypes() to the consumer if its topic carries other types",
			ErrUnexpectedType, name, s.typeName))
	}
	env.logger.DebugContext(msg.Context(), "skipping a message of another type",
		logattr.Handler, env.handlerName, logattr.MessageUUID, msg.UUID,
		logattr.Type, name, "want_type", s.typeName)
	return true, nil
}
