package idempotency

import (
	"context"
	"time"
)

// TxStore is a [Store] that also runs a handler's work in a transaction of
// its own database holding the claim of the message's key, so that the
// claim and the work commit or roll back together: the transactional mode
// of the idempotency middleware. The PostgreSQL store is one.
type TxStore interface {
	Store
	// Transact begins a transaction, claims c.Key in it and calls fn with a
	// context that carries the transaction; it commits when fn returns nil
	// and rolls back otherwise, returning fn's error. When the key has a
	// fresh mark it returns claimed false, and fn's work is not kept
	// (with c.Defer, fn may have run until its first statement).
	Transact(ctx context.Context, c Claim, fn func(ctx context.Context) error) (claimed bool, err error)
}

// Claim is what [TxStore.Transact] claims, and how.
type Claim struct {
	// Key is the stored key, as [ScopedKey] returns it.
	Key string
	// LockKeys are locked before the claim, in the same round trip, and
	// held until the transaction ends: the partition keys of the messages
	// the transaction will write into an outbox, so that one key's
	// messages are forwarded in the order their transactions commit.
	LockKeys []string
	// Defer sends the transaction's BEGIN and the claim with fn's first
	// statement instead of before fn runs, saving a round trip; fn then
	// starts before the claim is decided.
	Defer bool
	// Timeout bounds each step of the store's own (begin and claim,
	// commit); zero means no bound but ctx's.
	Timeout time.Duration
}
