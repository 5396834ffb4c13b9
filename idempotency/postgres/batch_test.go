package postgres_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/pgtest"
)

// TestProcessedKeysAnswersEachKey: ProcessedKeys reports exactly the keys
// that have a mark, whatever the number of distinct keys asked about: one
// (which goes in the single-key statement), one twice, or several; and
// MarkProcessedKeys marks each key it is given.
func TestProcessedKeysAnswersEachKey(t *testing.T) {
	pool := pgtest.Pool(t)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	marked, fresh, named := newUUIDKey(), newUUIDKey(), "orders/42"
	if err := s.MarkProcessedKeys(ctxT(t), []string{marked, named}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		keys []string
		want []string
	}{
		{[]string{fresh}, nil},
		{[]string{fresh, fresh}, nil},
		{[]string{marked}, []string{marked}},
		{[]string{named, named}, []string{named}},
		{[]string{fresh, marked, "orders/43", named}, []string{marked, named}},
	} {
		got, err := s.ProcessedKeys(ctxT(t), c.keys)
		if err != nil {
			t.Fatal(err)
		}
		for k, done := range got {
			if !done {
				t.Errorf("ProcessedKeys(%q) holds %q as false; it holds processed keys only", c.keys, k)
			}
		}
		if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, slices.Sorted(slices.Values(c.want))) {
			t.Errorf("ProcessedKeys(%q) = %v, want %q processed", c.keys, got, c.want)
		}
	}
}
