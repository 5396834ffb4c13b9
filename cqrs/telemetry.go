package cqrs

import (
	"context"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/components/requestreply"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/telemetry"
)

// telemetryOf returns t, or the Telemetry of OpenTelemetry's global
// providers when t is nil.
func telemetryOf(t *telemetry.Telemetry) (*telemetry.Telemetry, error) {
	if t != nil {
		return t, nil
	}
	tel, err := telemetry.New(telemetry.Config{})
	if err != nil {
		return nil, fmt.Errorf("cqrs: %w", err)
	}
	return tel, nil
}

// observedRequest is request in the span and metrics of a request/reply
// (telemetry.Telemetry.StartRequest).
func (d *CommandDispatcher) observedRequest(ctx context.Context, name string, cmd any) (*message.Message, error) {
	ctx, _ = correlation.Ensure(ctx) // before the span, which records it
	ctx, end := d.tel.StartRequest(ctx, d.routes[name])
	reply, err := d.request(ctx, name, cmd)
	outcome, failure := requestOutcome(reply, err)
	end(outcome, reply, failure)
	return reply, err
}

// requestOutcome returns how a request ended, and its error, the
// handler's included.
func requestOutcome(reply *message.Message, err error) (string, error) {
	switch {
	case errors.Is(err, ErrTimeout):
		return "timeout", err
	case err != nil:
		return "error", err
	case reply.Metadata.Get(requestreply.HasErrorMetadataKey) == "1":
		return "handler-error", &HandlerError{
			Kind:    reply.Metadata.Get(errorKindKey),
			Message: reply.Metadata.Get(requestreply.ErrorMetadataKey),
		}
	}
	return "ok", nil
}
