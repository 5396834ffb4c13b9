package benchmarks_test

import (
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/idempotency"
)

// BenchmarkMemoryCheckMark compares MemoryStore's check+mark with the one
// call Watermill's map repository makes per message, on new keys and on
// duplicates, from one goroutine and from GOMAXPROCS goroutines (go run
// ./cmd/koto-bench memory prints the ratios).
func BenchmarkMemoryCheckMark(b *testing.B) {
	for _, mode := range []struct {
		name     string
		parallel bool
	}{{"serial", false}, {"parallel", true}} {
		b.Run("new/"+mode.name+"/watermill", func(b *testing.B) {
			benchmarks.MemoryNew(b, benchmarks.WatermillCheck(newWatermill(b, benchmarks.MemoryNewWindow)), mode.parallel)
		})
		b.Run("new/"+mode.name+"/koto", func(b *testing.B) {
			benchmarks.MemoryNew(b, benchmarks.MemoryStoreCheck(newKoto(b, benchmarks.MemoryNewWindow)), mode.parallel)
		})
		b.Run("dup/"+mode.name+"/watermill", func(b *testing.B) {
			benchmarks.MemoryDup(b, benchmarks.WatermillCheck(newWatermill(b, benchmarks.MemoryDupWindow)), mode.parallel)
		})
		b.Run("dup/"+mode.name+"/koto", func(b *testing.B) {
			benchmarks.MemoryDup(b, benchmarks.MemoryStoreCheck(newKoto(b, benchmarks.MemoryDupWindow)), mode.parallel)
		})
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
