package middleware

import (
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/correlation"
)

// Correlation carries the correlation ID of the incoming message through the
// handler, as the package doc describes. It takes the ID from the message's
// metadata (key [correlation.MetadataKey]), or makes a new one when the
// message has none, and puts it in the message context
// ([correlation.FromContext]). Every message the handler returns that has
// no correlation ID gets this one. The incoming message's metadata is left
// as it is.
func Correlation(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		id := correlation.FromMessage(msg)
		if id == "" {
			id = correlation.NewID()
		}
		ctx := correlation.WithID(msg.Context(), id)
		msg.SetContext(ctx)
		produced, err := h(msg)
		correlation.Stamp(ctx, produced...)
		return produced, err
	}
}
