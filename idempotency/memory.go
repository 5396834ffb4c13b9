package idempotency

import (
	"context"
	"sync"
	"time"
)

// shardCount is the number of independently locked parts of a MemoryStore.
const shardCount = 64

// MemoryStore is a Store in process memory: fast, and forgotten on restart.
// Use it in development and tests, or where a redelivery after a restart is
// acceptable; production consumers want the PostgreSQL store.
//
// A MemoryStore is safe for concurrent use: keys are spread over 64
// independently locked shards. IsProcessed is exact to the window: a mark
// counts for exactly the window after MarkProcessed, whether or not anything
// has been swept. Memory follows what the window holds: each shard keeps its
// marks in two generations of one window each and drops the older one whole
// once all its marks have expired, so a store holds the marks of about the
// last two windows (plus at most one sweep interval, half a window or a
// minute). Shards rotate as marks arrive and, when idle, from a sweeper
// goroutine, which Close stops.
//
// Keys are compared as strings, byte for byte. (The PostgreSQL store
// compares KeyUUID(key), which also folds the case of UUID keys.)
type MemoryStore struct {
	window time.Duration
	start  time.Time            // with a monotonic reading
	clock  func() time.Duration // replaces time.Since(start) in tests
	shards [shardCount]shard

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns a MemoryStore whose marks count for window; a
// window <= 0 means DefaultWindow. Close it to stop its sweeper goroutine.
func NewMemoryStore(window time.Duration) *MemoryStore {
	return newMemoryStore(window, nil)
}

func newMemoryStore(window time.Duration, clock func() time.Duration) *MemoryStore {
	if window <= 0 {
		window = DefaultWindow
	}
	s := &MemoryStore{
		window: window,
		start:  time.Now(),
		clock:  clock,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	for i := range s.shards {
		s.shards[i].cur = make(map[string]time.Duration)
	}
	go s.sweepLoop(sweepInterval(window))
	return s
}

// Window returns how long a mark counts.
func (s *MemoryStore) Window() time.Duration { return s.window }

// IsProcessed reports whether key was marked less than the window ago. It
// never fails and does not block on ctx.
func (s *MemoryStore) IsProcessed(_ context.Context, key string) (bool, error) {
	at, ok := s.shard(key).lookup(key)
	return ok && s.now()-at < s.window, nil
}

// MarkProcessed records key as processed now. Marking a key that holds a
// mark younger than the window keeps the older mark, as the PostgreSQL
// store does. It never fails and does not block on ctx.
func (s *MemoryStore) MarkProcessed(_ context.Context, key string) error {
	s.shard(key).add(key, s.now, s.window)
	return nil
}

// Len returns the number of marks held, including expired marks whose
// generation has not been dropped yet.
func (s *MemoryStore) Len() int {
	n := 0
	for i := range s.shards {
		n += s.shards[i].size()
	}
	return n
}

// Close stops the sweeper and waits for it to return. The store keeps
// answering after Close, and its shards still drop expired generations as
// new marks arrive.
// Close is safe to call more than once; it always returns nil.
func (s *MemoryStore) Close() error {
	s.once.Do(func() { close(s.stop) })
	<-s.done
	return nil
}

// now is the monotonic time since the store was made.
func (s *MemoryStore) now() time.Duration {
	if s.clock != nil {
		return s.clock()
	}
	return time.Since(s.start)
}

func (s *MemoryStore) shard(key string) *shard {
	return &s.shards[shardOf(key)]
}
