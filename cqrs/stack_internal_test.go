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

// deepHandler needs about 10 KiB of stack, as the middleware chain, JSON
// decoding and a reply do, in frames of its own.
//
//go:noinline
func deepHandler(depth int) byte {
	var frame [512]byte
	frame[depth%len(frame)] = byte(depth)
	if depth == 0 {
		return frame[0]
	}
	return deepHandler(depth-1) + frame[depth%len(frame)]
}

// BenchmarkGrowStack runs a handler that needs ~10 KiB of stack on a new
// goroutine per message, as Watermill's router does, with and without
// growStackMiddleware in front: the stack grown once against the doublings
// and copies of 2 → 4 → 8 → 16 KiB.
//
//	go test -run '^$' -bench GrowStack -count 6 ./cqrs
func BenchmarkGrowStack(b *testing.B) {
	handler := func(*message.Message) ([]*message.Message, error) { deepHandler(20); return nil, nil }
	msg := message.NewMessage("1", nil)
	for _, bc := range []struct {
		name string
		h    message.HandlerFunc
	}{
		{"without", handler},
		{"with", growStackMiddleware(handler)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			done := make(chan struct{})
			for b.Loop() {
				go func() {
					_, _ = bc.h(msg)
					done <- struct{}{}
				}()
				<-done
			}
		})
	}
}
