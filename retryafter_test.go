package koto_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"
)

// TestRetryAfter: the mark keeps the error's text and chain, is
// retryable, and gives its delay unless a Poison or Outage mark sits
// above it; nil stays nil, a negative delay is zero.
func TestRetryAfter(t *testing.T) {
	base := errors.New("rate limited")
	marked := koto.RetryAfter(base, 10*time.Minute)
	if marked.Error() != "rate limited" || !errors.Is(marked, base) || koto.ClassOf(marked) != koto.ClassRetryable {
		t.Errorf("RetryAfter: %q, Is base %v, class %v", marked, errors.Is(marked, base), koto.ClassOf(marked))
	}
	for _, c := range []struct {
		name  string
		err   error
		delay time.Duration
		ok    bool
	}{
		{"marked", marked, 10 * time.Minute, true},
		{"wrapped", fmt.Errorf("charge: %w", marked), 10 * time.Minute, true},
		{"above an outage", koto.RetryAfter(koto.Outage(base), time.Second), time.Second, true},
		{"under a poison mark", koto.Poison(marked), 0, false},
		{"under an outage mark", koto.Outage(marked), 0, false},
		{"negative", koto.RetryAfter(base, -time.Second), 0, true},
		{"unmarked", base, 0, false},
	} {
		if d, ok := koto.RetryDelay(c.err); d != c.delay || ok != c.ok {
			t.Errorf("%s: RetryDelay = %v, %v; want %v, %v", c.name, d, ok, c.delay, c.ok)
		}
	}
	if koto.ClassOf(koto.RetryAfter(koto.Outage(base), time.Second)) != koto.ClassRetryable {
		t.Error("RetryAfter above an outage: not retryable")
	}
	if koto.RetryAfter(nil, time.Second) != nil {
		t.Error("RetryAfter(nil) is not nil")
	}
}
