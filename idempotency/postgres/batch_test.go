package postgres_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
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

// TestTransactBatchClaimsNewKeysOnly: the claimed flags follow the keys'
// order, false for a key processed before; once committed, the same keys
// claim nothing and fn is not called.
func TestTransactBatchClaimsNewKeysOnly(t *testing.T) {
	pool := pgtest.Pool(t)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	done := newUUIDKey()
	if err := s.MarkProcessedKeys(ctxT(t), []string{done}); err != nil {
		t.Fatal(err)
	}
	keys := []string{"orders/7", done, newUUIDKey()}
	var got []bool
	claim := func(claimed []bool, _ func(context.Context) context.Context) error {
		got = slices.Clone(claimed)
		return nil
	}
	if err := s.TransactBatch(ctxT(t), idempotency.BatchClaim{Keys: keys}, claim); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []bool{true, false, true}) {
		t.Errorf("claimed %v, want [true false true]", got)
	}
	got = nil
	if err := s.TransactBatch(ctxT(t), idempotency.BatchClaim{Keys: keys}, claim); err != nil || got != nil {
		t.Errorf("the committed keys again: fn called with %v, error %v; want no call", got, err)
	}
}
