package middleware

import (
	"context"
	"sync"
)

// turns lets one delivery per key at a time through check-handle-mark:
// two copies of a message in flight at once (a concurrent subscriber, two
// partitions) would otherwise both find the key unmarked and both run the
// handler. An entry lives only while a delivery holds or waits for its
// key, so the map is as large as the deliveries in flight, and waiting
// needs no goroutine. The zero value is ready.
type turns struct {
	mu   sync.Mutex
	keys map[string]*turn
}

// turn is one key's: a delivery holds it while token has its value.
type turn struct {
	token chan struct{} // capacity 1; waiting senders queue in order
	users int           // deliveries holding or waiting, under turns.mu
}

// take waits until the delivery has key's turn, or ctx ends (its error).
// Call the release it returns once the delivery settled.
func (ts *turns) take(ctx context.Context, key string) (release func(), err error) {
	t := ts.join(key)
	select {
	case t.token <- struct{}{}:
		return func() {
			<-t.token
			ts.leave(key, t)
		}, nil
	case <-ctx.Done():
		ts.leave(key, t)
		return nil, ctx.Err()
	}
}

func (ts *turns) join(key string) *turn {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.keys[key]
	if t == nil {
		if ts.keys == nil {
			ts.keys = map[string]*turn{}
		}
		t = &turn{token: make(chan struct{}, 1)}
		ts.keys[key] = t
	}
	t.users++
	return t
}

func (ts *turns) leave(key string, t *turn) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t.users--; t.users == 0 {
		delete(ts.keys, key)
	}
}
