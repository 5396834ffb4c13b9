package kototest

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// ClosedAddr returns a loopback address where nothing listens: a port the
// system handed out and that was freed again, so a dial to it is refused at
// once instead of timing out.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("kototest: listen: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("kototest: close listener: %v", err)
	}
	return addr
}

// WantRefused fails t unless err wraps the refused dial of a client pointed
// at [ClosedAddr]: what the user must see when Kafka is not running.
func WantRefused(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("%s against a closed port: %v, want an error wrapping %v", what, err, syscall.ECONNREFUSED)
	}
}
