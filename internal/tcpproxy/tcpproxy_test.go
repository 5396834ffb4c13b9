package tcpproxy_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/internal/pgtest"
	"github.com/koto-dev/watermill-koto/internal/tcpproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCutAndRestore(t *testing.T) {
	cfg := pgtest.Config(t)
	target := net.JoinHostPort(cfg.ConnConfig.Host, itoa(cfg.ConnConfig.Port))
	p, err := tcpproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	host, port, _ := net.SplitHostPort(p.Addr())
	cfg.ConnConfig.Host = host
	n, _ := strconv.Atoi(port)
	cfg.ConnConfig.Port = uint16(n)
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool := pgtest.PoolWith(t, cfg)

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
	pool.Close()
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }
