package cqrs

import (
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
)

// TestGrowStackMiddlewarePassesThrough checks that the middleware hands the
// message to the handler and returns what the handler returns, unchanged.
func TestGrowStackMiddlewarePassesThrough(t *testing.T) {
	in := message.NewMessage("1", []byte("x"))
	out := []*message.Message{message.NewMessage("2", nil)}
	wantErr := errors.New("handler failed")
	var got *message.Message
	h := growStackMiddleware(func(msg *message.Message) ([]*message.Message, error) {
		got = msg
		return out, wantErr
	})
	produced, err := h(in)
	if got != in {
		t.Errorf("the handler got %v, want the message passed in", got)
	}
	if len(produced) != 1 || produced[0] != out[0] || !errors.Is(err, wantErr) {
		t.Errorf("got (%v, %v), want the handler's (%v, %v)", produced, err, out, wantErr)
	}
}
