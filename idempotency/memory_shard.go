package idempotency

import (
	"sync"
	"time"
)

// shard holds the marks of the keys that hash to it, in two generations:
// cur holds the marks made since curStart, prev those made before it. The
// first add or sweep once a window has passed since curStart finds every
// mark of prev expired: it drops prev whole and cur becomes prev. Expiry
// thus never deletes keys one by one, and a shard holds the marks of about
// its last two windows.
type shard struct {
	mu       sync.Mutex
	cur      map[string]time.Duration
	prev     map[string]time.Duration
	curStart time.Duration
	_        [64]byte
}

// lookup returns when key was marked, if the shard holds a mark for it.
func (s *shard) lookup(key string) (time.Duration, bool) {
	s.mu.Lock()
	at, ok := s.cur[key]
	if !ok {
		at, ok = s.prev[key]
	}
	s.mu.Unlock()
	return at, ok
}

// add marks key now, unless it holds a mark younger than window.
func (s *shard) add(key string, clock func() time.Duration, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := clock()
	s.rotate(now, window)
	if _, ok := s.cur[key]; ok {
		return // made since curStart, less than a window ago
	}
	if at, ok := s.prev[key]; ok && now-at < window {
		return
	}
	s.cur[key] = now
}

// sweep drops the generations that have expired.
func (s *shard) sweep(clock func() time.Duration, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rotate(clock(), window)
}

// rotate starts a new generation once a window has passed since curStart.
// The marks of prev were all made before curStart, so they have expired;
// after two windows cur has expired too.
func (s *shard) rotate(now, window time.Duration) {
	if now-s.curStart < window {
		return
	}
	if now-s.curStart >= 2*window || len(s.cur) == 0 {
		s.prev = nil
	} else {
		s.prev = s.cur
	}
	s.cur = make(map[string]time.Duration, len(s.prev))
	s.curStart = now
}

// size returns the number of marks held, expired or not.
func (s *shard) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cur) + len(s.prev)
}
