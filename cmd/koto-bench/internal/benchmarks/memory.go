package benchmarks

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/koto-dev/watermill-koto/idempotency"
)

// The memory benchmarks compare idempotency.MemoryStore's check+mark
// (IsProcessed, then MarkProcessed when not processed: what a consumer does
// per message) with the one call Watermill's map repository
// (middleware.NewMapExpiringKeyRepository, behind its Deduplicator) makes
// per message, IsDuplicate.
//
// MemoryNew gives every operation a key never seen before, with a window
// (MemoryNewWindow) short enough that both stores expire marks while they
// run, as a long-running consumer does; MemoryDup checks keys that are all
// already marked.

const (
	// MemoryNewWindow is the window of the stores MemoryNew runs on.
	MemoryNewWindow = 10 * time.Millisecond
	// MemoryDupWindow is the window of the stores MemoryDup runs on: longer
	// than any run, so that every key stays a duplicate.
	MemoryDupWindow = time.Hour
	memoryDupKeys   = 1024
	memoryRingSize  = 1 << 17
)

// KeyCheck is what a consumer asks a store per message: skip key if it was
// processed, else process it and remember it.
type KeyCheck func(ctx context.Context, key string) error

// MemoryStoreCheck is KeyCheck on a MemoryStore: IsProcessed, then
// MarkProcessed when the key is new.
func MemoryStoreCheck(s *idempotency.MemoryStore) KeyCheck {
	return func(ctx context.Context, key string) error {
		done, err := s.IsProcessed(ctx, key)
		if err != nil || done {
			return err
		}
		return s.MarkProcessed(ctx, key)
	}
}

// WatermillCheck is KeyCheck on Watermill's repository: IsDuplicate, which
// records the key when it is new.
func WatermillCheck(r middleware.ExpiringKeyRepository) KeyCheck {
	return func(ctx context.Context, key string) error {
		_, err := r.IsDuplicate(ctx, key)
		return err
	}
}

// memoryKey returns a fresh key shaped like a message UUID.
func memoryKey(worker, i uint64) string {
	var buf [36]byte
	copy(buf[:], "00000000-0000-7000-8000-000000000000")
	w := strconv.AppendUint(nil, worker, 16)
	n := strconv.AppendUint(nil, i, 16)
	copy(buf[8-len(w):8], w)
	copy(buf[36-len(n):], n)
	return string(buf[:])
}

// memoryRing returns memoryRingSize fresh keys for one worker. Cycling
// through them takes far longer than MemoryNewWindow, so every key has
// expired by the time it comes round again and each operation sees a key
// that is not processed.
func memoryRing(worker uint64) []string {
	keys := make([]string, memoryRingSize)
	for i := range keys {
		keys[i] = memoryKey(worker, uint64(i))
	}
	return keys
}

// MemoryNew runs op on b.N new keys, from one goroutine or, parallel, from
// GOMAXPROCS goroutines (testing.B.RunParallel), each with keys of its own.
// Give it a store whose window is MemoryNewWindow.
func MemoryNew(b *testing.B, op KeyCheck, parallel bool) {
	ctx := context.Background()
	rings := make([][]string, runtime.GOMAXPROCS(0))
	for w := range rings {
		rings[w] = memoryRing(uint64(w + 1))
	}
	if !parallel {
		keys := rings[0]
		for i := 0; b.Loop(); i++ {
			if err := op(ctx, keys[i%memoryRingSize]); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		keys := rings[int(next.Add(1)-1)%len(rings)]
		for i := 0; pb.Next(); i++ {
			_ = op(ctx, keys[i%memoryRingSize])
		}
	})
}

// MemoryDup marks 1024 keys, then runs op b.N times on them, from one
// goroutine or, parallel, from GOMAXPROCS goroutines, each starting at a
// different key, as concurrent handlers see different messages. Give it a
// store whose window is MemoryDupWindow.
func MemoryDup(b *testing.B, op KeyCheck, parallel bool) {
	ctx := context.Background()
	keys := make([]string, memoryDupKeys)
	for i := range keys {
		keys[i] = memoryKey(0, uint64(i))
		_ = op(ctx, keys[i])
	}
	b.ResetTimer()
	if !parallel {
		for i := 0; b.Loop(); i++ {
			_ = op(ctx, keys[i%memoryDupKeys])
		}
		return
	}
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)*131) % memoryDupKeys
		for ; pb.Next(); i++ {
			_ = op(ctx, keys[i%memoryDupKeys])
		}
	})
}

// MemoryCase is one comparison of CompareMemory.
type MemoryCase struct {
	// Name is "new" or "dup", then "serial" or "parallel".
	Name     string
	dup      bool
	parallel bool
}

// Duplicates reports whether the case checks keys marked before the run.
func (c MemoryCase) Duplicates() bool { return c.dup }

// MemoryCases returns new keys and duplicates, each from one goroutine and
// from GOMAXPROCS goroutines.
func MemoryCases() []MemoryCase {
	var out []MemoryCase
	for _, dup := range []bool{false, true} {
		for _, parallel := range []bool{false, true} {
			name := "new keys"
			if dup {
				name = "duplicates"
			}
			if parallel {
				name += ", " + strconv.Itoa(runtime.GOMAXPROCS(0)) + " goroutines"
			} else {
				name += ", 1 goroutine"
			}
			out = append(out, MemoryCase{Name: name, dup: dup, parallel: parallel})
		}
	}
	return out
}

// stores returns KeyChecks on a new Watermill map repository and a new
// MemoryStore with c's window, and a function that closes the MemoryStore.
// (Watermill's repository cannot be stopped: its cleaning goroutine runs
// until the process ends.)
func (c MemoryCase) stores() (watermill, koto KeyCheck, closeStore func(), err error) {
	window := MemoryNewWindow
	if c.dup {
		window = MemoryDupWindow
	}
	r, err := middleware.NewMapExpiringKeyRepository(window)
	if err != nil {
		return nil, nil, nil, err
	}
	s := idempotency.NewMemoryStore(window)
	return WatermillCheck(r), MemoryStoreCheck(s), func() { _ = s.Close() }, nil
}

// run runs the body of c on op.
func (c MemoryCase) run(b *testing.B, op KeyCheck) {
	if c.dup {
		MemoryDup(b, op, c.parallel)
	} else {
		MemoryNew(b, op, c.parallel)
	}
}

// MemoryResult is the throughput of both stores in one case.
type MemoryResult struct {
	Case             MemoryCase
	Watermill, Store float64 // ops/s
}

// Ratio returns Store/Watermill, or 0 when Watermill did nothing.
func (r MemoryResult) Ratio() float64 {
	if r.Watermill == 0 {
		return 0
	}
	return r.Store / r.Watermill
}

// CompareMemory benchmarks each case rounds times per store, alternating
// which goes first, with testing.Benchmark (whose run time is the
// test.benchtime flag). Each case gets one store of each kind for all its
// rounds.
func CompareMemory(rounds int) ([]MemoryResult, error) {
	var out []MemoryResult
	for _, c := range MemoryCases() {
		w, k, closeStore, err := c.stores()
		if err != nil {
			return nil, err
		}
		rw, rk := interleave(func(b *testing.B) { c.run(b, w) }, func(b *testing.B) { c.run(b, k) }, rounds)
		closeStore()
		out = append(out, MemoryResult{Case: c, Watermill: opsPerSec(rw), Store: opsPerSec(rk)})
	}
	return out, nil
}

// clockSink keeps ClockRead's reads from being optimised away.
var clockSink atomic.Int64

// ClockRead reads the monotonic clock b.N times, as time.Since does: the
// least that an answer exact to a window costs, since a mark found must be
// compared with the time now. Watermill's map repository reads no clock on
// a duplicate (its marks last until a sweep removes them, up to half a
// window late).
func ClockRead(b *testing.B) {
	start := time.Now()
	var d time.Duration
	for b.Loop() {
		d += time.Since(start)
	}
	clockSink.Store(int64(d))
}

// CompareClockFloor benchmarks ClockRead beside Watermill's map repository
// on duplicates from one goroutine, rounds times each, alternating, and
// returns both in ops/s.
func CompareClockFloor(rounds int) (clock, watermill float64, err error) {
	c := MemoryCase{dup: true}
	w, _, closeStore, err := c.stores()
	if err != nil {
		return 0, 0, err
	}
	defer closeStore()
	rc, rw := interleave(ClockRead, func(b *testing.B) { c.run(b, w) }, rounds)
	return opsPerSec(rc), opsPerSec(rw), nil
}
