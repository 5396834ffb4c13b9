package cqrs

import (
	"encoding/json"
	"fmt"
	"reflect"

	wcqrs "github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/ThreeDotsLabs/watermill/components/requestreply"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// Metadata keys that this package writes and reads.
const (
	// TypeNameMetadataKey holds the message's type name, topics.TypeName of
	// the event or command. It is the key of Watermill's cqrs.JSONMarshaler,
	// so Watermill's own CQRS processors understand these messages, and
	// broker's record mappings translate it (CloudEvents' type, Wolverine's
	// message-type).
	TypeNameMetadataKey = koto.TypeNameMetadataKey

	// OperationIDMetadataKey holds the operation ID that pairs a request with
	// its reply. It is the key of Watermill's requestreply package.
	OperationIDMetadataKey = requestreply.OperationIDMetadataKey

	// ReplyToMetadataKey holds, on a request, the topic its reply goes to.
	// A command without it is fire-and-forget.
	ReplyToMetadataKey = "koto_reply_to"

	// ErrorKindMetadataKey holds, on a failed reply, HandlerError.Kind. The
	// message is in requestreply.ErrorMetadataKey, and
	// requestreply.HasErrorMetadataKey is "1".
	ErrorKindMetadataKey = "koto_error_kind"
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
// travels in the metadata key broker.PartitionKeyMetadataKey. An empty key
// leaves the partition to the producer.
type PartitionKeyer interface {
	PartitionKey() string
}

// marshaler is the JSON wire format of this package. It implements
// Watermill's cqrs.CommandEventMarshaler.
type marshaler struct{}

var _ wcqrs.CommandEventMarshaler = marshaler{}

// Marshal encodes v as JSON in a new message with its type name, message ID
// and partition key.
func (marshaler) Marshal(v any) (*message.Message, error) {
	name := topics.TypeName(v)
	if name == "" {
		return nil, fmt.Errorf("cqrs: %T has no type name; use a named type", v)
	}
	payload, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cqrs: encoding %s: %w", name, err)
	}
	id := ""
	if ider, ok := implements[MessageIDer](v); ok {
		id = ider.MessageID()
	}
	if id == "" {
		id = newMessageID()
	}
	msg := message.NewMessage(id, payload)
	msg.Metadata.Set(TypeNameMetadataKey, name)
	if keyer, ok := implements[PartitionKeyer](v); ok {
		if key := keyer.PartitionKey(); key != "" {
			msg.Metadata.Set(broker.PartitionKeyMetadataKey, key)
		}
	}
	return msg, nil
}

// Unmarshal decodes the JSON payload of msg into v. A payload that does not
// decode is marked middleware.Poison: no retry can fix it.
func (marshaler) Unmarshal(msg *message.Message, v any) error {
	if err := json.Unmarshal(msg.Payload, v); err != nil {
		return middleware.Poison(err)
	}
	return nil
}

// Name returns topics.TypeName(v).
func (marshaler) Name(v any) string { return topics.TypeName(v) }

// NameFromMessage returns the type name in the message's metadata.
func (marshaler) NameFromMessage(msg *message.Message) string {
	return msg.Metadata.Get(TypeNameMetadataKey)
}

// newMessageID returns a UUIDv7, which keeps the idempotency index
// append-mostly; correlation.NewID makes the same.
func newMessageID() string { return correlation.NewID() }

// implements returns v as an I when v, or a pointer to a copy of v, has I's
// methods.
func implements[I any](v any) (I, bool) {
	i, ok := v.(I)
	if ok || v == nil || !reflect.PointerTo(reflect.TypeOf(v)).Implements(reflect.TypeFor[I]()) {
		return i, ok
	}
	p := reflect.New(reflect.TypeOf(v))
	p.Elem().Set(reflect.ValueOf(v))
	return p.Interface().(I), true
}
