// Package correlation carries a correlation ID through a request's every
// hop: in a context.Context inside a service, and in message metadata
// between services.
//
// It is part of the vocabulary of the library's layers (README,
// Architecture): it talks to nothing.
//
// The metadata key is the one Watermill's own CorrelationID middleware uses,
// so messages from plain Watermill services and from watermill-koto services
// correlate with each other.
package correlation

import (
	"context"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
)

// MetadataKey is the message metadata key that holds the correlation ID.
const MetadataKey = "correlation_id"

type ctxKey struct{}

// FromContext returns the correlation ID stored in ctx, or "" if there is none.
func FromContext(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// WithID returns a copy of ctx that carries the correlation ID id.
func WithID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromMessage returns the correlation ID in a message's metadata, or "" if
// it has none.
func FromMessage(msg *message.Message) string {
	return msg.Metadata.Get(MetadataKey)
}

// NewID returns a new correlation ID: a UUIDv7, so IDs sort by creation time.
func NewID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// Ensure returns ctx with a correlation ID: the one ctx already has, or a new
// one. The ID is returned too.
func Ensure(ctx context.Context) (context.Context, string) {
	if id := FromContext(ctx); id != "" {
		return ctx, id
	}
	id := NewID()
	return WithID(ctx, id), id
}

// Stamp sets the correlation ID of ctx on each message that has none yet. A
// message that already carries an ID keeps it. With no ID in ctx, Stamp does
// nothing.
func Stamp(ctx context.Context, msgs ...*message.Message) {
	id := FromContext(ctx)
	if id == "" {
		return
	}
	for _, msg := range msgs {
		if FromMessage(msg) == "" {
			msg.Metadata.Set(MetadataKey, id)
		}
	}
}
