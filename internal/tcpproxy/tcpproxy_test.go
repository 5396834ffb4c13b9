package tcpproxy_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/internal/pgtest"
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
