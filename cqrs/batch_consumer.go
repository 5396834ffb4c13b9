package cqrs

import (
	"context"
	"encoding/json"
	"fmt"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
)

// BatchItem is one event of the batch a batch consumer handles.
type BatchItem[T any] struct {
	// Event is the message's payload, decoded from JSON.
	Event *T
	// Message is the message: its UUID and metadata, and its context,
	// with its correlation ID and, in a DurableOutbox's Service, the
	// batch's transaction. Name it in middleware.FailMessages when its
	// event fails.
	Message *message.Message
}

// WithBatch sets how a batch consumer's batches fill (broker.BatchConfig:
// at most 500 messages, 1 MiB, 50 ms from the first message, 2 batches
// running at once, by default). Other consumers reject it.
func WithBatch(cfg broker.BatchConfig) ConsumerOption {
	return func(o *consumerOptions) { o.batch = &cfg }
}

// NewBatchEventConsumer returns a Consumer of events of type T that
// handles them in batches: handle gets many events at once, in the order
// of their partitions' offsets, duplicates left out, and in a
// DurableOutbox's Service writes their effects in one transaction that
// claims them all (postgres.TxFromContext(ctx)). Give the producing
// service with [From], or the topic with [Topic]; [WithBatch] sizes the
// batches. It is idempotent by default, as [NewEventConsumer] is; the
// package doc (Batch consumers) says what becomes of its events and
// errors.
func NewBatchEventConsumer[T any](handle func(ctx context.Context, batch []BatchItem[T]) error, opts ...ConsumerOption) Consumer {
	s := newSpec[T](eventKind, opts)
	s.prepare = func(msg *message.Message, env *handlerEnv) (skip bool, err error) {
		if skip, err := s.checkType(msg, env); skip || err != nil {
			return skip, err
		}
		ev := new(T)
		if err := json.Unmarshal(msg.Payload, ev); err != nil {
			return false, koto.Poison(fmt.Errorf("cqrs: decoding %s: %w", s.typeName, err))
		}
		msg.SetContext(context.WithValue(msg.Context(), decodedKey{}, ev))
		return false, nil
	}
	s.handleBatch = func(ctx context.Context, msgs []*message.Message) error {
		items := make([]BatchItem[T], len(msgs))
		for i, m := range msgs {
			ev, _ := m.Context().Value(decodedKey{}).(*T)
			items[i] = BatchItem[T]{Event: ev, Message: m}
		}
		return handle(ctx, items)
	}
	return s
}

// decodedKey holds, in a message's context, its payload decoded by a
// batch consumer before the message joins a batch.
type decodedKey struct{}
