package postgres

import (
	"bytes"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/koto-dev/watermill-koto/idempotency"
)

// TestKeyArgs: each key's stored UUID, in the keys' order, copies
// included; and the distinct UUIDs once each, in ascending order.
func TestKeyArgs(t *testing.T) {
	keys := []string{"orders/2", "0199b0a6-4fd2-7c3e-8a61-5b7f4c2d9e10", "orders/1", "orders/2", "orders/3"}
	ids, args := keyArgs(keys)
	if len(ids) != len(keys) {
		t.Fatalf("%d ids for %d keys", len(ids), len(keys))
	}
	for i, k := range keys {
		if ids[i] != idempotency.KeyUUID(k) {
			t.Errorf("id %d = %x, want KeyUUID(%q)", i, ids[i], k)
		}
	}
	if len(args) != 4 || !slices.IsSortedFunc(args, func(a, b pgtype.UUID) int { return bytes.Compare(a.Bytes[:], b.Bytes[:]) }) {
		t.Fatalf("args %v: want the 4 distinct UUIDs in ascending order", args)
	}
	for i, a := range args {
		if !a.Valid || i > 0 && a.Bytes == args[i-1].Bytes || !slices.Contains(ids, a.Bytes) {
			t.Errorf("arg %d = %v: not a distinct, valid UUID of the keys", i, a)
		}
	}
}
