package middleware

import (
	"cmp"
	"context"
	"strings"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
)

// member is one delivery of a message on its way through a batch.
type member struct {
	msg    *message.Message
	ctx    context.Context // the delivery's, as it arrived
	pos    koto.Position
	hasPos bool
	after  *koto.Predecessor // the message before it in its key, not acked when it was handed out
	size   int
	key    scopedKey // with a store
	locks  []string  // in the transactional mode, from IdempotencyConfig.LockKeys

	batch  *batch        // under the batcher's mu, once placed
	placed chan struct{} // closed when a predecessor pulls it into a batch
	done   chan fate     // what became of it; buffered
	gone   atomic.Bool   // its delivery stopped waiting: its context ended
}

// fate is what a batch made of one member.
type fate struct {
	kind fateKind
	err  error // of fateFailed
}

type fateKind int

const (
	fateOK        fateKind = iota // handled and committed
	fateDuplicate                 // already processed, or a copy of a handled message of the batch
	fateFailed                    // err goes up the chain: retried, dead-lettered or waited out
	fateRequeued                  // an earlier message of its key failed: it waits for it again
)

// newMember returns the member of msg. Its key and lock keys are computed
// now: an error of IdempotencyConfig's Key or LockKeys makes it poison.
func (b *batcher) newMember(msg *message.Message) (*member, error) {
	ctx := msg.Context()
	m := &member{msg: msg, ctx: ctx, size: len(msg.Payload), done: make(chan fate, 1)}
	for k, v := range msg.Metadata {
		m.size += len(k) + len(v)
	}
	m.pos, m.hasPos = koto.PositionFromContext(ctx)
	if after, ok := koto.PredecessorFromContext(ctx); ok {
		m.after = &after
	}
	if b.cfg.store == nil {
		return m, nil
	}
	var err error
	if m.key, err = b.cfg.idem.keyOf(msg); err != nil {
		return nil, err
	}
	if b.cfg.idem.Transactional && b.cfg.idem.LockKeys != nil {
		if m.locks, err = b.cfg.idem.LockKeys(msg); err != nil {
			return nil, koto.Poison(err)
		}
	}
	return m, nil
}

// again returns a fresh member of m's message, for a requeued member to be
// placed again.
func (m *member) again() *member {
	return &member{msg: m.msg, ctx: m.ctx, pos: m.pos, hasPos: m.hasPos, after: m.after,
		size: m.size, key: m.key, locks: m.locks, done: make(chan fate, 1)}
}

// link is where a message sits in its partition: what its successor's
// Predecessor names.
type link struct {
	topic     string
	partition int32
	offset    int64
}

// at is the link of m; ok is false for a message without a position.
func (m *member) at() (l link, ok bool) {
	return link{m.pos.Topic, m.pos.Partition, m.pos.Offset}, m.hasPos
}

// afterLink is the link of m's predecessor.
func (m *member) afterLink() link {
	return link{m.pos.Topic, m.pos.Partition, m.after.Offset}
}

// lane is the order m must keep: its key in its partition. Messages
// without a position have a lane of their own each.
type lane struct {
	topic     string
	partition int32
	key       string
	alone     *member
}

func (m *member) lane() lane {
	if !m.hasPos {
		return lane{alone: m}
	}
	return lane{topic: m.pos.Topic, partition: m.pos.Partition, key: string(m.pos.Key)}
}

// compareMembers orders members by topic, partition and offset, which
// keeps each key's messages in their order; messages without a position
// come last, as they arrived.
func compareMembers(a, b *member) int {
	switch {
	case a.hasPos != b.hasPos:
		if a.hasPos {
			return -1
		}
		return 1
	case !a.hasPos:
		return 0
	}
	return cmp.Or(strings.Compare(a.pos.Topic, b.pos.Topic), cmp.Compare(a.pos.Partition, b.pos.Partition), cmp.Compare(a.pos.Offset, b.pos.Offset))
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
