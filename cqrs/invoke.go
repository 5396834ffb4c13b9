package cqrs

import (
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/internal/logattr"
)

// Invoke runs c's function once on msg, as a Service runs it once the
// message has passed the consumer's middleware: the type check, the
// decoding, a command's reply to a Request published with pub (nil
// drops it), a batch
// consumer's function on a batch of msg alone. It runs no middleware: no
// idempotency, retries or dead letters. It is for unit tests of consumers,
// with the correlation ID and the transaction the test puts in msg's
// context (package kototest builds both). logger may be nil.
func Invoke(c Consumer, msg *message.Message, pub message.Publisher, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if pub == nil {
		pub = dropReplies{}
	}
	s := c.spec()
	env := &handlerEnv{handlerName: "invoke " + s.typeName, pub: pub, logger: logger.With(logattr.Handler, "invoke")}
	if !s.batched() {
		return s.handle(msg, env)
	}
	if skip, err := s.prepare(msg, env); skip || err != nil {
		return err
	}
	return s.handleBatch(msg.Context(), []*message.Message{msg})
}

// dropReplies is the publisher of Invoke's replies when it is given none.
type dropReplies struct{}

func (dropReplies) Publish(string, ...*message.Message) error { return nil }
func (dropReplies) Close() error                              { return nil }
