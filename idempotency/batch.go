package idempotency

import (
	"context"
	"time"
)

// BatchStore is a [Store] that checks and marks many keys with one call
// each: the batched check-handle-mark of the idempotency middleware.
// Stores without it are called once per key.
type BatchStore interface {
	Store
	// ProcessedKeys returns the keys among keys that were marked within
	// the window.
	ProcessedKeys(ctx context.Context, keys []string) (map[string]bool, error)
	// MarkProcessedKeys marks every key of keys, as MarkProcessed does.
	MarkProcessedKeys(ctx context.Context, keys []string) error
}

// TxBatchStore is a [TxStore] that claims many keys in one transaction:
// the transactional mode of a batch handler.
type TxBatchStore interface {
	TxStore
	// TransactBatch begins a transaction, claims every key of c.Keys in
	// one statement and calls fn with which of them it claimed (the others
	// have a fresh mark) and bind, which returns a context carrying the
	// transaction, as Transact's fn gets it; it commits when fn returns
	// nil and rolls back otherwise, returning fn's error. It does not call
	// fn when it claimed no key. The keys must be distinct.
	TransactBatch(ctx context.Context, c BatchClaim, fn func(claimed []bool, bind func(context.Context) context.Context) error) error
}

// BatchClaim is what [TxBatchStore.TransactBatch] claims, and how.
type BatchClaim struct {
	// Keys are the stored keys, as [ScopedKey] returns them.
	Keys []string
	// LockKeys are locked before the claim, as in [Claim].
	LockKeys []string
	// Timeout bounds each step of the store's own (begin and claim,
	// commit); zero means no bound but ctx's.
	Timeout time.Duration
}
