// Package idempotency decides whether a message was already processed.
//
// It is part of the vocabulary of the library's layers (README,
// Architecture): it talks to nothing.
//
// A Store remembers message keys for a window (DefaultWindow, 24 hours,
// unless configured otherwise). MemoryStore keeps them in process memory and
// loses them on restart; the PostgreSQL store in package
// idempotency/postgres keeps them across restarts and redeploys, which is
// what production consumers want under Kafka's at-least-once delivery.
//
// Keys are any strings. The PostgreSQL store persists them as KeyUUID(key);
// MemoryStore compares them as they are.
package idempotency

import (
	"context"
	"errors"
	"time"
)

// DefaultWindow is how long a processed mark counts when no window is
// configured.
const DefaultWindow = 24 * time.Hour

// Store remembers which message keys were processed.
type Store interface {
	// IsProcessed reports whether key was marked within the window.
	IsProcessed(ctx context.Context, key string) (bool, error)
	// MarkProcessed records key as processed now. Marking a key twice is
	// not an error.
	MarkProcessed(ctx context.Context, key string) error
}

// ErrStoreUnavailable marks an error of a store's backing service (a
// database that cannot be reached, a timeout). It is an outage, not a
// property of the message: callers retry, they never dead-letter.
var ErrStoreUnavailable = errors.New("idempotency store unavailable")
