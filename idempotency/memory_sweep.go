package idempotency

import "time"

// sweepInterval is how often the sweeper drops expired generations: half
// the window, between a millisecond and a minute.
func sweepInterval(window time.Duration) time.Duration {
	return min(max(window/2, time.Millisecond), time.Minute)
}

// sweepLoop drops expired generations from every shard each interval until
// Close.
func (s *MemoryStore) sweepLoop(interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sweep()
		}
	}
}

// sweep drops the expired generations of every shard, one shard lock at a
// time.
func (s *MemoryStore) sweep() {
	for i := range s.shards {
		s.shards[i].sweep(s.now, s.window)
	}
}
