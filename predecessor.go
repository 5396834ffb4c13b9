package koto

import "context"

// Predecessor is the message before a message of the same Kafka record
// key and partition, still unacked when the later one was handed out. A
// subscriber that hands out several messages of a key at once (the
// broker's OrderByKeyInBatches) puts it in the later message's context,
// so that the handler can keep the key's order: a batch handler commits a
// message only with or after its predecessor.
type Predecessor struct {
	// Offset is the predecessor's offset, in the same topic and partition.
	Offset int64
	// Done is closed once the predecessor is acked.
	Done <-chan struct{}
}

type predecessorKey struct{}

// ContextWithPredecessor returns ctx carrying p.
func ContextWithPredecessor(ctx context.Context, p Predecessor) context.Context {
	return context.WithValue(ctx, predecessorKey{}, p)
}

// PredecessorFromContext returns the predecessor in ctx, and whether there
// is one: none for the first message of its key in flight, and none from
// a subscriber that hands out one message of a key at a time.
func PredecessorFromContext(ctx context.Context) (Predecessor, bool) {
	p, ok := ctx.Value(predecessorKey{}).(Predecessor)
	return p, ok
}
