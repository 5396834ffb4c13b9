package middleware_test

import (
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/middleware"
)

func TestBackoffDelay(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		b       middleware.Backoff
		attempt int
		want    time.Duration
	}{
		{middleware.Backoff{}, 0, 100 * ms}, // zero fields are the defaults: 100 ms, ×2, 10 s
		{middleware.Backoff{}, 3, 800 * ms},
		{middleware.Backoff{}, 50, 10 * time.Second},
		{middleware.Backoff{}, -1, 100 * ms},
		{middleware.Backoff{InitialInterval: 10 * ms, Multiplier: 3}, 2, 90 * ms},
		{middleware.Backoff{InitialInterval: 10 * ms, MaxInterval: 25 * ms}, 2, 25 * ms},
		{middleware.Backoff{InitialInterval: 10 * ms, Multiplier: 1}, 1000, 10 * ms},
	}
	for _, c := range cases {
		if got := c.b.Delay(c.attempt); got != c.want {
			t.Errorf("%+v.Delay(%d) = %v, want %v", c.b, c.attempt, got, c.want)
		}
	}
}
