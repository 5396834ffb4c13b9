package broker

import "sync"

// slots shares the Config.Concurrency workers of a subscriber between its
// assigned partitions, so that no partition can take them all: each has
// a share of its own, and the rest is shared, first come first served
// (the rule is in the package doc, Concurrent consumption). The workers
// bound the total; slots only decides which partition may offer the next
// record to them.
type slots struct {
	total int

	mu         sync.Mutex
	partitions int           // assigned, over every subscription
	borrowed   int           // shared slots in use
	freed      chan struct{} // closed, and replaced, when a shared slot is given back
}

func newSlots(total int) *slots {
	return &slots{total: total, freed: make(chan struct{})}
}

// join counts n partitions in; leave counts one out, with the shared
// slots it still held.
func (s *slots) join(n int) {
	s.mu.Lock()
	s.partitions += n
	s.mu.Unlock()
}

func (s *slots) leave(borrowed int) {
	s.mu.Lock()
	s.partitions--
	s.mu.Unlock()
	s.giveBack(borrowed)
}

// own is how many records each partition may have in flight on slots of
// its own: Concurrency / (2 × partitions), at least one while there are
// as many slots as partitions. Fewer slots than partitions leave none.
func (s *slots) own() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ownLocked()
}

func (s *slots) ownLocked() int {
	switch p := max(s.partitions, 1); {
	case s.total >= 2*p:
		return s.total / (2 * p)
	case s.total >= p:
		return 1
	}
	return 0
}

// borrow takes a shared slot for a partition that already holds held
// records in flight. When none is free it returns a channel closed once
// one is given back.
func (s *slots) borrow(held int) (ok bool, wait <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	own := s.ownLocked()
	shared := s.total - own*max(s.partitions, 1)
	if s.borrowed < shared && (own > 0 || held == 0) {
		s.borrowed++
		return true, nil
	}
	return false, s.freed
}

// giveBack returns n shared slots.
func (s *slots) giveBack(n int) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.borrowed -= n
	close(s.freed)
	s.freed = make(chan struct{})
}

// ticket is the slot a partition took for its next record.
type ticket int

const (
	noTicket ticket = iota
	ownTicket
	sharedTicket
)

// shared is 1 for a shared slot, 0 otherwise.
func (t ticket) shared() int {
	if t == sharedTicket {
		return 1
	}
	return 0
}
