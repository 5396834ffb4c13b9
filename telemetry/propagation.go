package telemetry

import (
	"context"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/propagation"
)

// extract returns ctx with the trace context in msg's metadata, as the
// remote parent of the spans started from it. Without one it returns ctx.
func (t *Telemetry) extract(ctx context.Context, msg *message.Message) context.Context {
	return t.prop.Extract(ctx, carrier(msg))
}

// carries reports whether msg's metadata has a field of the propagator.
func (t *Telemetry) carries(msg *message.Message) bool {
	for _, f := range t.prop.Fields() {
		if _, ok := msg.Metadata[f]; ok {
			return true
		}
	}
	return false
}

// carrier is msg's metadata as a propagation carrier; it gives msg
// metadata if it had none, so that Set works.
func carrier(msg *message.Message) propagation.MapCarrier {
	if msg.Metadata == nil {
		msg.Metadata = message.Metadata{}
	}
	return propagation.MapCarrier(msg.Metadata)
}
