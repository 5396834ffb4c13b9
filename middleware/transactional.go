package middleware

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/internal/reporting"
)

// txDedup is the transactional mode of Idempotency.
type txDedup struct {
	store idempotency.TxStore
	cfg   IdempotencyConfig
}

func (d *txDedup) middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		k, err := d.cfg.keyOf(msg)
		if err != nil {
			return nil, err
		}
		claim, err := d.claimOf(msg, k)
		if err != nil {
			return nil, err
		}
		ctx := msg.Context()
		defer msg.SetContext(ctx)
		var produced []*message.Message
		calls := d.timeCalls(ctx)
		claimed, err := d.store.Transact(ctx, claim, func(txCtx context.Context) error {
			calls.handlerStarts()
			msg.SetContext(txCtx)
			var err error
			if produced, err = h(msg); err != nil {
				return err
			}
			err = d.writeReturned(txCtx, produced)
			calls.handlerEnds(err)
			return err
		})
		calls.done(err)
		switch {
		case !claimed && err == nil:
			d.cfg.skipped(msg, k)
			return nil, nil
		case err != nil:
			return produced, err
		}
		return nil, nil
	}
}

// claimOf is what the store claims for msg. A LockKeys error makes the
// message poison.
func (d *txDedup) claimOf(msg *message.Message, k scopedKey) (idempotency.Claim, error) {
	c := idempotency.Claim{Key: k.stored, Defer: d.cfg.DeferClaim, Timeout: d.cfg.StoreTimeout}
	if d.cfg.LockKeys == nil {
		return c, nil
	}
	keys, err := d.cfg.LockKeys(msg)
	if err != nil {
		return c, koto.Poison(fmt.Errorf("middleware: transactional idempotency: lock keys: %w", err))
	}
	c.LockKeys = keys
	return c, nil
}

// writeReturned writes the messages the handler returned into the outbox
// in the transaction of ctx, for the router handler's publish topic, with
// the correlation ID of ctx, so that they commit with it; the router then
// has nothing left to publish. Without an outbox, or without a publish
// topic, they are poison.
func (d *txDedup) writeReturned(ctx context.Context, produced []*message.Message) error {
	n := len(produced)
	if n == 0 {
		return nil
	}
	if d.cfg.Outbox == nil {
		return koto.Poison(fmt.Errorf("%w (it returned %d)", ErrReturnedMessagesInTx, n))
	}
	topic := message.PublishTopicFromCtx(ctx)
	if topic == "" {
		return koto.Poison(fmt.Errorf("%w: it returned %d, but its router handler has no publish topic; "+
			"add it with router.AddHandler and a publish topic, or publish through the outbox's ContextPublisher", ErrReturnedMessagesInTx, n))
	}
	correlation.Stamp(ctx, produced...)
	wctx, cancel := context.WithTimeout(ctx, d.cfg.StoreTimeout)
	defer cancel()
	for _, m := range produced {
		m.SetContext(wctx)
	}
	if err := d.cfg.Outbox.Publish(topic, produced...); err != nil {
		return fmt.Errorf("middleware: transactional idempotency: writing %d returned message(s) for %s into the outbox: %w", n, topic, err)
	}
	return nil
}

// storeCalls times the store's part of one Transact for telemetry: the
// begin with the claim (unless deferred, when it travels with the
// handler's first statement) and the commit.
type storeCalls struct {
	ctx    context.Context
	claim  func(error) // nil once recorded, or when deferred
	commit func(error)
}

func (d *txDedup) timeCalls(ctx context.Context) *storeCalls {
	c := &storeCalls{ctx: ctx}
	if !d.cfg.DeferClaim {
		c.claim = reporting.From(ctx).StoreCall(reporting.StoreClaim)
	}
	return c
}

func (c *storeCalls) handlerStarts() {
	if c.claim != nil {
		c.claim(nil)
		c.claim = nil
	}
}

func (c *storeCalls) handlerEnds(err error) {
	if err == nil {
		c.commit = reporting.From(c.ctx).StoreCall(reporting.StoreCommit)
	}
}

func (c *storeCalls) done(err error) {
	switch {
	case c.claim != nil:
		c.claim(err)
	case c.commit != nil:
		c.commit(err)
	}
}
