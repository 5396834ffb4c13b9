package outbox

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/koto-dev/watermill-koto/internal/pgtx"
)

// Aggregate is implemented by a domain object that collects the events of
// its state changes until it is saved. Embed [Events] to implement it.
type Aggregate interface {
	// DomainEvents returns the events recorded since the last clear, in
	// the order they happened.
	DomainEvents() []any
	// ClearDomainEvents forgets the recorded events.
	ClearDomainEvents()
}

// Events implements [Aggregate]: embed it in an aggregate and call Record
// where its state changes. It is safe for concurrent use.
type Events struct {
	mu     sync.Mutex
	events []any
}

// Record appends events.
func (e *Events) Record(events ...any) {
	e.mu.Lock()
	e.events = append(e.events, events...)
	e.mu.Unlock()
}

// DomainEvents returns a copy of the recorded events.
func (e *Events) DomainEvents() []any {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]any(nil), e.events...)
}

// ClearDomainEvents forgets the recorded events.
func (e *Events) ClearDomainEvents() {
	e.mu.Lock()
	e.events = nil
	e.mu.Unlock()
}

// EventPublisher publishes one event value; *cqrs.EventPublisher is one.
// For PublishDomainEvents it must be built on [Outbox.ContextPublisher],
// so that its messages are written into the transaction of ctx.
type EventPublisher interface {
	Publish(ctx context.Context, event any) error
}

// PublishDomainEvents writes the events collected on aggregates, the ones
// saved in the transaction of ctx, into the outbox through pub, aggregate
// by aggregate in the order given and each aggregate's in the order
// recorded. ctx must carry a transaction bound with Outbox.Transact or a transactional handler:
// each aggregate's events are cleared only after that transaction commits,
// so a rollback leaves them on the aggregate and publishes none, ready for
// a retry. Calling it again for the same aggregate in the same transaction
// writes only the events recorded since. The commit clears every event of
// the aggregate, so an event recorded after the transaction's last call is
// cleared without being written: call it after the last change.
//
// Aggregates must be pointers. It returns an error wrapping
// ErrNoTransaction without a bound transaction, and one wrapping
// ErrNotThroughOutbox when pub published an event without writing it into
// that transaction (it is not built on Outbox.ContextPublisher): the event
// may then be out already, so return the error and let the transaction
// roll back.
func PublishDomainEvents(ctx context.Context, pub EventPublisher, aggregates ...Aggregate) error {
	u, ok := pgtx.From(ctx)
	if !ok {
		return fmt.Errorf("%w: PublishDomainEvents needs the transaction of Outbox.Transact or of a transactional handler", ErrNoTransaction)
	}
	for _, a := range aggregates {
		if err := publishAggregate(ctx, u, pub, a); err != nil {
			return err
		}
	}
	return nil
}

func publishAggregate(ctx context.Context, u *pgtx.Unit, pub EventPublisher, a Aggregate) error {
	if v := reflect.ValueOf(a); !v.IsValid() || v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("outbox: aggregate %T is not a non-nil pointer; pass a pointer to it", a)
	}
	events := a.DomainEvents()
	first, seen := u.Published(a)
	for i := first; i < len(events); i++ {
		before := u.Written()
		if err := pub.Publish(ctx, events[i]); err != nil {
			return fmt.Errorf("outbox: domain event %d of %T: %w", i, a, err)
		}
		if u.Written() == before {
			return fmt.Errorf("%w: domain event %d of %T went somewhere else; build the publisher on Outbox.ContextPublisher",
				ErrNotThroughOutbox, i, a)
		}
		u.SetPublished(a, i+1)
	}
	if !seen {
		u.SetPublished(a, len(events))
		return AfterCommit(ctx, a.ClearDomainEvents)
	}
	return nil
}
