package middleware

import (
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
)

// handleDeferred runs msg in a transaction whose BEGIN and claim travel
// with its first statement (see the package doc): h runs at once, and
// what the claim found decides the outcome once h has returned.
func (d *txDedup) handleDeferred(msg *message.Message, k scopedKey, locks []string, h message.HandlerFunc) ([]*message.Message, error) {
	ctx := msg.Context()
	var before func(b *pgx.Batch)
	if len(locks) > 0 {
		before = func(b *pgx.Batch) { d.cfg.Outbox.QueueLockKeys(b, locks...) }
	}
	tx := d.deferring.DeferClaim(k.stored, before)
	defer d.rollback(ctx, tx) // after a commit it does nothing; after a panic it ends tx
	produced, err := d.handleIn(msg, tx, h)
	sent, claimed, claimErr := tx.Outcome()
	switch {
	case claimErr != nil:
		return nil, Outage(fmt.Errorf("middleware: transactional idempotency: %w", claimErr))
	case sent && !claimed:
		d.cfg.skipped(msg, k)
		return nil, nil
	}
	return produced, err
}
