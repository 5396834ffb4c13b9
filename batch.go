package koto

import (
	"context"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill/message"
)

// Batch is the messages that a batch subscriber (the broker's
// NewBatchSubscriber) hands out together, as one message of its channel
// whose context carries the Batch ([BatchFromContext]). A batch handler
// (the middleware's BatchDefaults) settles each message with
// [Batch.Ack] or [Batch.Nack], as soon as its fate is known: an acked
// message's offset is done, and once every message of its key in the
// batch is settled, the key's later messages may go into another batch;
// a nacked one is handed out again.
type Batch struct {
	// Messages are the batch's messages, in the order of their partition's
	// offsets. Each has its own context, with its position.
	Messages []*message.Message
	// Reason says why the batch stopped filling: "count", "bytes" or
	// "time"; it labels the batch's telemetry.
	Reason string

	settle  func(i int, acked bool)
	settled []atomic.Bool
}

// NewBatch returns the batch of msgs; settle, if not nil, is called once
// for each message that is acked or nacked.
func NewBatch(msgs []*message.Message, settle func(i int, acked bool)) *Batch {
	return &Batch{Messages: msgs, settle: settle, settled: make([]atomic.Bool, len(msgs))}
}

// Ack acks message i, once: later calls for it do nothing.
func (b *Batch) Ack(i int) { b.done(i, true) }

// Nack nacks message i, once: later calls for it do nothing.
func (b *Batch) Nack(i int) { b.done(i, false) }

// Settled reports whether message i was acked or nacked.
func (b *Batch) Settled(i int) bool { return b.settled[i].Load() }

func (b *Batch) done(i int, acked bool) {
	if b.settled[i].Swap(true) {
		return
	}
	if acked {
		b.Messages[i].Ack()
	} else {
		b.Messages[i].Nack()
	}
	if b.settle != nil {
		b.settle(i, acked)
	}
}

type batchKey struct{}

// ContextWithBatch returns ctx carrying b.
func ContextWithBatch(ctx context.Context, b *Batch) context.Context {
	return context.WithValue(ctx, batchKey{}, b)
}

// BatchFromContext returns the batch in ctx, and whether there is one.
func BatchFromContext(ctx context.Context) (*Batch, bool) {
	b, ok := ctx.Value(batchKey{}).(*Batch)
	return b, ok
}
