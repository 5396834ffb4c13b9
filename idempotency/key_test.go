package idempotency_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/koto-dev/watermill-koto/idempotency"
)

func TestKeyUUID(t *testing.T) {
	id := uuid.New()
	if got := idempotency.KeyUUID(id.String()); got != id {
		t.Errorf("KeyUUID(uuid) = %v, want itself %v", got, id)
	}
	if got := idempotency.KeyUUID(strings.ToUpper(id.String())); got != id {
		t.Errorf("KeyUUID(upper-case uuid) = %v, want %v", got, id)
	}
	a, b := idempotency.KeyUUID("orders/0/42"), idempotency.KeyUUID("orders/0/43")
	if a == b {
		t.Errorf("different keys share UUID %v", a)
	}
	if a != idempotency.KeyUUID("orders/0/42") {
		t.Errorf("KeyUUID is not deterministic")
	}
	if a.Version() != 5 {
		t.Errorf("KeyUUID of a non-UUID key has version %d, want 5", a.Version())
	}
	want := uuid.NewSHA1(uuid.MustParse("3c1b8f5e-2d0a-5b8e-9a41-6b0f3c6d7e21"), []byte("orders/0/42"))
	if a != want {
		t.Errorf("KeyUUID changed its namespace: got %v, want %v", a, want)
	}
	if idempotency.KeyUUID("") == uuid.Nil {
		t.Errorf("the empty key maps to the nil UUID")
	}
}

// TestKeyUUIDIsNewSHA1: the stored UUID of any key that is not a UUID is
// uuid.NewSHA1's under the namespace, at every length (longer keys than
// KeyUUID's stack buffer included), and computing it allocates nothing.
func TestKeyUUIDIsNewSHA1(t *testing.T) {
	ns := uuid.MustParse("3c1b8f5e-2d0a-5b8e-9a41-6b0f3c6d7e21")
	for n := range 300 {
		key := strings.Repeat("k", n/2) + "/" + strings.Repeat("é", n-n/2)[:n-n/2]
		if got, want := idempotency.KeyUUID(key), uuid.NewSHA1(ns, []byte(key)); got != want {
			t.Fatalf("KeyUUID of a %d-byte key = %v, want %v", len(key), got, want)
		}
	}
	key := "payments.order-placed-consumer/" + uuid.NewString()
	if allocs := testing.AllocsPerRun(100, func() { idempotency.KeyUUID(key) }); allocs != 0 {
		t.Errorf("KeyUUID of a scoped key allocates %.0f times, want 0", allocs)
	}
}

// BenchmarkKeyUUID hashes a scoped message key, as a store does for each
// check, mark and claim.
func BenchmarkKeyUUID(b *testing.B) {
	key := "payments.order-placed-consumer/" + uuid.NewString()
	b.ReportAllocs()
	for b.Loop() {
		idempotency.KeyUUID(key)
	}
}

func TestScopedKey(t *testing.T) {
	if got := idempotency.ScopedKey("", "k"); got != "k" {
		t.Errorf("empty scope: %q", got)
	}
	if got := idempotency.ScopedKey("payments.order-placed-consumer", "k"); got != "payments.order-placed-consumer/k" {
		t.Errorf("scoped: %q", got)
	}
}
