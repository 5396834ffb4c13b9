// Package pgtx carries a PostgreSQL transaction in a context, with the
// bookkeeping that the outbox and the transactional idempotency mode share:
// what runs after its commit, how many messages were written in it, and
// which domain events of which aggregates were.
package pgtx

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
)

// ErrCommitted is returned by AfterCommit once the transaction committed.
var ErrCommitted = errors.New("the transaction has committed already")

// Unit is one transaction bound to a context with [Bind].
type Unit struct {
	Tx pgx.Tx

	mu          sync.Mutex
	afterCommit []func()
	done        bool
	written     int
	published   map[any]int
}

type unitKey struct{}

// Bind returns ctx carrying tx, and its unit, whose Committed the owner of
// tx calls once tx has committed.
func Bind(ctx context.Context, tx pgx.Tx) (context.Context, *Unit) {
	u := NewUnit(tx)
	return u.Bind(ctx), u
}

// From returns the unit of the transaction in ctx.
func From(ctx context.Context) (*Unit, bool) {
	u, ok := ctx.Value(unitKey{}).(*Unit)
	return u, ok && u != nil && u.Tx != nil
}

// AfterCommit registers fn to run once the transaction has committed.
func (u *Unit) AfterCommit(fn func()) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done {
		return ErrCommitted
	}
	u.afterCommit = append(u.afterCommit, fn)
	return nil
}

// Committed runs the functions registered with AfterCommit, in order,
// once; later calls do nothing.
func (u *Unit) Committed() {
	u.mu.Lock()
	if u.done {
		u.mu.Unlock()
		return
	}
	u.done = true
	fns := u.afterCommit
	u.afterCommit = nil
	u.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// Wrote counts n messages written in the transaction.
func (u *Unit) Wrote(n int) {
	u.mu.Lock()
	u.written += n
	u.mu.Unlock()
}

// Written returns how many messages were written in the transaction.
func (u *Unit) Written() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.written
}

// Published returns how many of key's events were written in the
// transaction, and whether any were.
func (u *Unit) Published(key any) (int, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n, ok := u.published[key]
	return n, ok
}

// SetPublished records that n of key's events were written.
func (u *Unit) SetPublished(key any, n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.published == nil {
		u.published = map[any]int{}
	}
	u.published[key] = n
}

// NewUnit returns the unit of tx, for owners that bind it to many
// contexts with [Unit.Bind].
func NewUnit(tx pgx.Tx) *Unit { return &Unit{Tx: tx} }

// Bind returns ctx carrying u: every context bound to one unit shares its
// AfterCommit work and its counts.
func (u *Unit) Bind(ctx context.Context) context.Context {
	return context.WithValue(ctx, unitKey{}, u)
}
