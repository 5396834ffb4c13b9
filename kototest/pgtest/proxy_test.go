package pgtest_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCutAndRestore(t *testing.T) {
	pool, p := pgtest.ProxiedPool(t)

	ctx := context.Background()
	ping := func() error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		var one int
		return pool.QueryRow(ctx, "SELECT 1").Scan(&one)
	}
	if err := ping(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Cut()
	if err := ping(); err == nil {
		t.Fatal("query succeeded through a cut proxy")
	}
	p.Restore()
	deadline := time.Now().Add(10 * time.Second)
	for ping() != nil {
		if time.Now().After(deadline) {
			t.Fatal("queries still fail after Restore")
		}
	}
}

// TestDelayAddsToEachRoundTrip: with a delay of 20 ms each way, a query's
// round trip through the proxy takes at least 40 ms more, on a connection
// that was open before the delay. Only a lower bound is checked: a slow
// machine only adds to it.
func TestDelayAddsToEachRoundTrip(t *testing.T) {
	pool, p := pgtest.ProxiedPool(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	defer conn.Release() // opened before the delay
	roundTrip := func() time.Duration {
		t.Helper()
		start := time.Now()
		var one int
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatalf("through the proxy: %v", err)
		}
		return time.Since(start)
	}
	roundTrip()
	p.SetDelay(20 * time.Millisecond)
	if took := roundTrip(); took < 40*time.Millisecond {
		t.Errorf("a round trip on an open connection took %v through a proxy delaying 20 ms each way, want at least 40 ms", took)
	}
}
