package koto

import (
	"errors"
	"fmt"
	"net"
	"testing"
)

func TestMarkErrorTypeIsTheMarkedErrors(t *testing.T) {
	opErr := &net.OpError{Op: "dial", Err: errors.New("refused")}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{Outage(opErr), "*net.OpError"},
		{Poison(fmt.Errorf("decoding: %w", opErr)), "*net.OpError"},
		{Outage(fmt.Errorf("two: %w, %w", opErr, errors.New("x"))), "*net.OpError"},
		{Poison(errors.New("plain")), "*errors.errorString"},
	} {
		m := tc.err.(*mark)
		if got := m.ErrorType(); got != tc.want {
			t.Errorf("ErrorType of %v = %q, want %q", tc.err, got, tc.want)
		}
	}
}
