package idempotency_test

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

// The benchmarks compare MemoryStore's check+mark (IsProcessed, then
// MarkProcessed when not processed: what a consumer does per message) with
// the one call Watermill's map repository makes per message, IsDuplicate.
//
// "new" gives every operation a key never seen before, with a window short
// enough that both stores expire marks while they run, as a long-running
// consumer does; "dup" checks keys that are all already marked.

const (
	benchNewWindow = 10 * time.Millisecond
	benchDupKeys   = 1024
	ringSize       = 1 << 17
)

type checkMark func(ctx context.Context, key string) error

func koto(s *idempotency.MemoryStore) checkMark {
	return func(ctx context.Context, key string) error {
		done, err := s.IsProcessed(ctx, key)
		if err != nil || done {
			return err
		}
		return s.MarkProcessed(ctx, key)
	}
}

func watermill(r middleware.ExpiringKeyRepository) checkMark {
	return func(ctx context.Context, key string) error {
		_, err := r.IsDuplicate(ctx, key)
		return err
	}
}

func newWatermill(b *testing.B, window time.Duration) middleware.ExpiringKeyRepository {
	r, err := middleware.NewMapExpiringKeyRepository(window)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

func newKoto(b *testing.B, window time.Duration) *idempotency.MemoryStore {
	s := idempotency.NewMemoryStore(window)
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// newKey returns a fresh key shaped like a message UUID.
func newKey(worker, i uint64) string {
	var buf [36]byte
	copy(buf[:], "00000000-0000-7000-8000-000000000000")
	w := strconv.AppendUint(nil, worker, 16)
	n := strconv.AppendUint(nil, i, 16)
	copy(buf[8-len(w):8], w)
	copy(buf[36-len(n):], n)
	return string(buf[:])
}

// ring returns ringSize fresh keys for one worker. Cycling through them
// takes far longer than benchNewWindow, so every key has expired by the time
// it comes round again and each operation sees a key that is not processed.
func ring(worker uint64) []string {
	keys := make([]string, ringSize)
	for i := range keys {
		keys[i] = newKey(worker, uint64(i))
	}
	return keys
}

func runNew(b *testing.B, op checkMark, parallel bool) {
	ctx := context.Background()
	rings := make([][]string, runtime.GOMAXPROCS(0))
	for w := range rings {
		rings[w] = ring(uint64(w + 1))
	}
	if !parallel {
		keys := rings[0]
		for i := 0; b.Loop(); i++ {
			if err := op(ctx, keys[i%ringSize]); err != nil {
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
			_ = op(ctx, keys[i%ringSize])
		}
	})
}

func runDup(b *testing.B, op checkMark, parallel bool) {
	ctx := context.Background()
	keys := make([]string, benchDupKeys)
	for i := range keys {
		keys[i] = newKey(0, uint64(i))
		_ = op(ctx, keys[i])
	}
	b.ResetTimer()
	if !parallel {
		for i := 0; b.Loop(); i++ {
			_ = op(ctx, keys[i%benchDupKeys])
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			_ = op(ctx, keys[i%benchDupKeys])
		}
	})
}

func BenchmarkMemoryCheckMark(b *testing.B) {
	for _, mode := range []struct {
		name     string
		parallel bool
	}{{"serial", false}, {"parallel", true}} {
		b.Run("new/"+mode.name+"/watermill", func(b *testing.B) {
			runNew(b, watermill(newWatermill(b, benchNewWindow)), mode.parallel)
		})
		b.Run("new/"+mode.name+"/koto", func(b *testing.B) {
			runNew(b, koto(newKoto(b, benchNewWindow)), mode.parallel)
		})
		b.Run("dup/"+mode.name+"/watermill", func(b *testing.B) {
			runDup(b, watermill(newWatermill(b, time.Hour)), mode.parallel)
		})
		b.Run("dup/"+mode.name+"/koto", func(b *testing.B) {
			runDup(b, koto(newKoto(b, time.Hour)), mode.parallel)
		})
	}
}
