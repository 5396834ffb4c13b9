package idempotency

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when told to.
type fakeClock struct{ now atomic.Int64 }

func (c *fakeClock) read() time.Duration     { return time.Duration(c.now.Load()) }
func (c *fakeClock) set(d time.Duration)     { c.now.Store(int64(d)) }
func (c *fakeClock) advance(d time.Duration) { c.now.Add(int64(d)) }

func newFakeStore(t *testing.T, window time.Duration) (*MemoryStore, *fakeClock) {
	t.Helper()
	clock := &fakeClock{}
	s := newMemoryStore(window, clock.read)
	t.Cleanup(func() { _ = s.Close() })
	return s, clock
}

func processed(t *testing.T, s *MemoryStore, key string) bool {
	t.Helper()
	ok, err := s.IsProcessed(context.Background(), key)
	if err != nil {
		t.Fatalf("IsProcessed(%q): %v", key, err)
	}
	return ok
}

func markAll(t *testing.T, s *MemoryStore, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if err := s.MarkProcessed(context.Background(), k); err != nil {
			t.Fatalf("MarkProcessed(%q): %v", k, err)
		}
	}
}

func TestMemoryWindowIsExact(t *testing.T) {
	const window = time.Hour
	s, clock := newFakeStore(t, window)
	clock.set(5 * time.Minute)
	markAll(t, s, "k")
	clock.set(5*time.Minute + window - time.Nanosecond)
	if !processed(t, s, "k") {
		t.Fatal("a mark one nanosecond younger than the window is not processed")
	}
	clock.set(5*time.Minute + window)
	if processed(t, s, "k") {
		t.Fatal("a mark exactly as old as the window is still processed")
	}
	if s.Len() != 1 {
		t.Fatalf("Len = %d before any sweep, want the expired mark still held", s.Len())
	}
}

func TestMemoryRemarkKeepsFreshAndRefreshesExpired(t *testing.T) {
	const window = time.Minute
	s, clock := newFakeStore(t, window)
	markAll(t, s, "k")
	clock.set(40 * time.Second)
	markAll(t, s, "k") // within the window: the first mark stands
	clock.set(window)
	if processed(t, s, "k") {
		t.Fatal("marking again within the window extended the mark")
	}
	markAll(t, s, "k") // expired: a new mark
	clock.set(window + window - time.Nanosecond)
	if !processed(t, s, "k") {
		t.Fatal("marking an expired key did not make it processed again")
	}
}

func TestMemoryMarksSurviveRotation(t *testing.T) {
	const window = time.Minute
	s, clock := newFakeStore(t, window)
	markAll(t, s, "a")
	clock.set(59 * time.Second)
	markAll(t, s, "b")
	clock.set(61 * time.Second)
	markAll(t, s, "c") // shards that see this mark start a new generation
	s.sweep()          // and so do all the others
	if processed(t, s, "a") {
		t.Fatal("a mark 61 s old counts in a 60 s window")
	}
	if !processed(t, s, "b") || !processed(t, s, "c") {
		t.Fatal("a fresh mark from the previous generation was lost")
	}
	markAll(t, s, "b") // still fresh: the mark made at 59 s stands
	clock.set(59*time.Second + window)
	if processed(t, s, "b") {
		t.Fatal("marking a fresh key again extended its mark")
	}
}

func TestMemorySweepDropsExpiredMarks(t *testing.T) {
	const window = time.Minute
	s, clock := newFakeStore(t, window)
	for i := range 5000 {
		markAll(t, s, "old-"+strconv.Itoa(i))
	}
	clock.set(window)
	s.sweep()
	markAll(t, s, "fresh")
	if processed(t, s, "old-1") || !processed(t, s, "fresh") {
		t.Fatal("wrong marks count after one window")
	}
	clock.set(2 * window)
	s.sweep()
	if got := s.Len(); got != 1 {
		t.Fatalf("Len after two windows = %d, want 1 (only the fresh mark)", got)
	}
	clock.set(4 * window)
	s.sweep()
	if got := s.Len(); got != 0 {
		t.Fatalf("Len after two idle windows = %d, want 0", got)
	}
}

// TestMemoryBoundedWithoutSweeper feeds a steady stream of new keys through
// a store and checks that it holds no more than the marks of the last two
// windows, whether or not its sweeper has run.
func TestMemoryBoundedWithoutSweeper(t *testing.T) {
	const window = time.Second
	s, clock := newFakeStore(t, window)
	const perWindow = 1000 // marks made during one window
	for i := range 20 * perWindow {
		clock.advance(window / perWindow)
		markAll(t, s, "k-"+strconv.Itoa(i))
	}
	if got := s.Len(); got > 2*perWindow || got < perWindow {
		t.Fatalf("holding %d marks with %d per window, want between one and two windows' worth", got, perWindow)
	}
}

func TestMemorySweeperRuns(t *testing.T) {
	s, clock := newFakeStore(t, 2*time.Millisecond)
	markAll(t, s, "a", "b", "c")
	clock.advance(time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for s.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the sweeper left %d expired marks", s.Len())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSweepInterval(t *testing.T) {
	for _, c := range []struct{ window, want time.Duration }{
		{DefaultWindow, time.Minute},
		{time.Minute, 30 * time.Second},
		{time.Microsecond, time.Millisecond},
	} {
		if got := sweepInterval(c.window); got != c.want {
			t.Errorf("sweepInterval(%v) = %v, want %v", c.window, got, c.want)
		}
	}
}

// TestShardOfSpreadsKeys checks that keys which differ only in a few
// trailing or leading characters, as offsets and UUIDs do, use every shard
// about evenly.
func TestShardOfSpreadsKeys(t *testing.T) {
	const n = 64 * shardCount
	for name, key := range map[string]func(i int) string{
		"offset":  func(i int) string { return "orders/3/" + strconv.Itoa(i) },
		"uuidish": func(i int) string { return "00000000-0000-7000-8000-000000000" + strconv.FormatInt(int64(i), 16) },
		"prefix":  func(i int) string { return strconv.Itoa(i) + "/payments.order-placed-consumer" },
	} {
		var counts [shardCount]int
		for i := range n {
			counts[shardOf(key(i))]++
		}
		for s, c := range counts {
			if c < n/shardCount/4 || c > 4*n/shardCount {
				t.Errorf("%s keys: shard %d got %d of %d", name, s, c, n)
				break
			}
		}
	}
}
