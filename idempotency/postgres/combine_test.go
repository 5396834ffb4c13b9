package postgres_test

import (
	"strconv"
	"sync"
	"testing"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// TestConcurrentCheckMark: 16 callers check and mark keys at once, every
// key by two callers and a fifth of them marked beforehand, so that
// statements carry several keys, some twice. Each check answers for its
// own key and every key ends up marked.
func TestConcurrentCheckMark(t *testing.T) {
	pool := pgtest.Pool(t)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	const keys, callers = 200, 16
	names := make([]string, keys)
	for i := range names {
		names[i] = "key-" + strconv.Itoa(i)
		if i%5 == 0 {
			mustMark(t, s, names[i])
		}
	}
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := c % (callers / 2); i < keys; i += callers / 2 { // callers c and c+8 share keys
				done, err := s.IsProcessed(ctxT(t), names[i])
				if err != nil {
					t.Error(err)
					return
				}
				if i%5 == 0 && !done {
					t.Errorf("%s was marked beforehand but IsProcessed says no", names[i])
				}
				if err := s.MarkProcessed(ctxT(t), names[i]); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, name := range names {
		if !isProcessed(t, s, name) {
			t.Fatalf("%s not marked", name)
		}
	}
}
