package cqrs

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/components/requestreply"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/topics"
)

// Metadata keys that this package writes and reads besides
// koto.TypeNameMetadataKey (the key of Watermill's cqrs.JSONMarshaler, so
// Watermill's own CQRS processors understand these messages).
const (
	// operationIDKey pairs a request with its reply; Watermill's
	// requestreply package uses it too.
	operationIDKey = requestreply.OperationIDMetadataKey
	// replyToKey holds, on a request, the topic its reply goes to. A
	// command without it is fire-and-forget.
	replyToKey = "koto_reply_to"
	// errorKindKey holds, on a failed reply, HandlerError.Kind; the text is
	// in requestreply.ErrorMetadataKey, and requestreply.HasErrorMetadataKey
	// is "1".
	errorKindKey = "koto_error_kind"
)

// MessageIDer is implemented by an event or command that carries its own
// message ID. The publisher uses it as the Watermill message UUID instead of
// a new UUIDv7, so publishing the same logical event twice gives two
// messages with one ID, and idempotent consumers handle it once. Any string
// works; a UUID is stored as itself by the idempotency stores, other strings
// are hashed (see idempotency.KeyUUID). An empty ID means "assign one".
type MessageIDer interface {
	MessageID() string
}

// PartitionKeyer is implemented by an event or command that chooses its
// Kafka partition key, typically the ID of the aggregate it belongs to, so
// that one aggregate's messages stay in order on one partition. The key
// travels in the metadata key koto.PartitionKeyMetadataKey. An empty key
// leaves the partition to the producer.
type PartitionKeyer interface {
	PartitionKey() string
}

// encoder is the JSON wire format of this package's publishing side: it
// turns an event or command into a message with its type name, message ID
// and partition key. What reflection tells of a Go type is resolved once
// per type, since it is on the critical path of every publish and request.
// Its zero value is ready to use; it is safe for concurrent use.
type encoder struct {
	types sync.Map // reflect.Type → *goType
}

// goType is what encoding needs to know of a Go type.
type goType struct {
	name   string // its type name; "" when it names itself (topics.Namer)
	namer  bool
	idPtr  bool // only a pointer to it is a MessageIDer
	keyPtr bool // only a pointer to it is a PartitionKeyer
}

// of returns what encoding needs to know of v's type.
func (e *encoder) of(v any) *goType {
	t := reflect.TypeOf(v)
	if g, ok := e.types.Load(t); ok {
		return g.(*goType)
	}
	g := &goType{
		namer:  t.Implements(namerType) || reflect.PointerTo(t).Implements(namerType),
		idPtr:  onPointerOnly[MessageIDer](t),
		keyPtr: onPointerOnly[PartitionKeyer](t),
	}
	if !g.namer {
		g.name = topics.TypeName(v)
	}
	e.types.Store(t, g)
	return g
}

var namerType = reflect.TypeFor[topics.Namer]()

// onPointerOnly reports whether *t has I's methods and t has not.
func onPointerOnly[I any](t reflect.Type) bool {
	i := reflect.TypeFor[I]()
	return !t.Implements(i) && reflect.PointerTo(t).Implements(i)
}

// name returns topics.TypeName(v); v must not be nil.
func (e *encoder) name(v any) string {
	if g := e.of(v); !g.namer {
		return g.name
	}
	return topics.TypeName(v)
}

// encode encodes v, whose type name is name, as JSON in a new message.
func (e *encoder) encode(v any, name string) (*message.Message, error) {
	if name == "" {
		return nil, errNoTypeName(v)
	}
	payload, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cqrs: encoding %s: %w", name, err)
	}
	g := e.of(v)
	id := ""
	if ider, ok := implements[MessageIDer](v, g.idPtr); ok {
		id = ider.MessageID()
	}
	if id == "" {
		id = newMessageID()
	}
	msg := message.NewMessage(id, payload)
	msg.Metadata.Set(koto.TypeNameMetadataKey, name)
	if keyer, ok := implements[PartitionKeyer](v, g.keyPtr); ok {
		if key := keyer.PartitionKey(); key != "" {
			msg.Metadata.Set(koto.PartitionKeyMetadataKey, key)
		}
	}
	return msg, nil
}

// errNoTypeName is the error of sending or publishing v, whose type has
// no type name.
func errNoTypeName(v any) error {
	return fmt.Errorf("cqrs: %T has no type name; use a named type", v)
}

// publish encodes v and publishes it to topic through pub, in ctx, with
// the correlation ID of ctx; modify, when not nil, adds to the message
// first.
func (e *encoder) publish(ctx context.Context, pub message.Publisher, topic string, v any, name string, modify func(*message.Message)) error {
	msg, err := e.encode(v, name)
	if err != nil {
		return err
	}
	if modify != nil {
		modify(msg)
	}
	msg.SetContext(ctx)
	correlation.Stamp(ctx, msg)
	return pub.Publish(topic, msg)
}

// newMessageID returns a UUIDv7, which keeps the idempotency index
// append-mostly; correlation.NewID makes the same.
func newMessageID() string { return correlation.NewID() }

// implements returns v as an I when v has I's methods, or, when onPtr
// says only its pointer has them, a pointer to a copy of v.
func implements[I any](v any, onPtr bool) (I, bool) {
	i, ok := v.(I)
	if ok || !onPtr {
		return i, ok
	}
	p := reflect.New(reflect.TypeOf(v))
	p.Elem().Set(reflect.ValueOf(v))
	return p.Interface().(I), true
}
