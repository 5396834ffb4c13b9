package middleware

import (
	"cmp"
	"context"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/correlation"
)

// member is one message of a batch on its way to its fate.
type member struct {
	i      int // in its koto.Batch
	msg    *message.Message
	ctx    context.Context // the message's, with its correlation ID
	pos    koto.Position
	hasPos bool
	size   int
	key    scopedKey // with a store
	locks  []string  // in the transactional mode, from IdempotencyConfig.LockKeys

	tries   delivery  // the failures of its retries, as DeadLetter counts them
	retryAt time.Time // when a failed member is tried again
	lastErr error
	group   string  // its consumer group, for parking
	entry   *Parked // the parking entry of a parked message come back
}

// fate is what one run made of a member.
type fate struct {
	kind fateKind
	err  error // of fateFailed
}

type fateKind int

const (
	fateOK        fateKind = iota // handled and committed
	fateDuplicate                 // already processed, or a copy of a handled message of the batch
	fateFailed                    // err decides: retried alone, dead-lettered or waited out
	fateRequeued                  // a message before it in its key failed: it waits for it
)

// newMember returns the member of msg, the i-th of its batch, with its
// correlation ID in its context (a new one when it has none). Its
// idempotency key and lock keys are computed now: an error of
// IdempotencyConfig's Key or LockKeys makes it poison.
func (b *batcher) newMember(i int, msg *message.Message) (*member, error) {
	id := correlation.FromMessage(msg)
	if id == "" {
		id = correlation.NewID()
	}
	ctx := correlation.WithID(msg.Context(), id)
	msg.SetContext(ctx)
	m := &member{i: i, msg: msg, ctx: ctx, size: len(msg.Payload)}
	m.pos, m.hasPos = koto.PositionFromContext(ctx)
	if b.cfg.store == nil {
		return m, nil
	}
	var err error
	if m.key, err = b.cfg.idem.keyOf(msg); err != nil {
		return m, err
	}
	if b.cfg.idem.Transactional && b.cfg.idem.LockKeys != nil {
		if m.locks, err = b.cfg.idem.LockKeys(msg); err != nil {
			return m, koto.Poison(err)
		}
	}
	return m, nil
}

// gone reports whether m's delivery ended: its partition was revoked and
// drained, or its subscription ended.
func (m *member) gone() bool { return m.ctx.Err() != nil }

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
// keep the order of their batch.
func compareMembers(a, b *member) int {
	if !a.hasPos || !b.hasPos {
		return cmp.Compare(a.i, b.i)
	}
	return cmp.Or(strings.Compare(a.pos.Topic, b.pos.Topic), cmp.Compare(a.pos.Partition, b.pos.Partition), cmp.Compare(a.pos.Offset, b.pos.Offset))
}
