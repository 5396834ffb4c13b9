package console

import (
	"errors"
	"sync"
)

// queues keeps one open dead-letter queue per group for the pages, which
// read it one call at a time; a replay opens one of its own, so that it
// does not hold the pages up.
type queues struct {
	cfg    Config
	mu     sync.Mutex
	open   map[string]*queue
	closed bool
}

var errClosed = errors.New("console: closed")

// get returns the queue of group, opening it on first use.
func (qs *queues) get(group string) (*queue, error) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.closed {
		return nil, errClosed
	}
	if q := qs.open[group]; q != nil {
		return q, nil
	}
	q, err := openQueue(qs.cfg, group)
	if err != nil {
		return nil, err
	}
	if qs.open == nil {
		qs.open = map[string]*queue{}
	}
	qs.open[group] = q
	return q, nil
}

// Close closes every queue; get fails after it.
func (qs *queues) Close() error {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.closed = true
	var err error
	for _, q := range qs.open {
		err = errors.Join(err, q.Close())
	}
	qs.open = nil
	return err
}
