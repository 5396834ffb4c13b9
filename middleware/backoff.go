package middleware

import (
	"context"
	"time"
)

// Backoff is an exponential backoff: the n-th wait (from 0) is
// InitialInterval × Multiplier^n, capped at MaxInterval ([Backoff.Delay]).
// There is no jitter.
type Backoff struct {
	// InitialInterval is the first wait. Default 100 ms.
	InitialInterval time.Duration
	// MaxInterval caps every wait. Default 10 s.
	MaxInterval time.Duration
	// Multiplier grows the wait after each retry. Default 2; at least 1.
	Multiplier float64
}

func (b *Backoff) setDefaults() {
	if b.InitialInterval == 0 {
		b.InitialInterval = 100 * time.Millisecond
	}
	if b.MaxInterval == 0 {
		b.MaxInterval = 10 * time.Second
	}
	if b.Multiplier == 0 {
		b.Multiplier = 2
	}
}

// validate checks b, zero fields counting as their defaults; prefix names
// the field b is in.
func (b Backoff) validate(prefix string) error {
	b.setDefaults()
	switch {
	case b.InitialInterval < 0:
		return invalid("%s.InitialInterval is negative (%v); use 0 for the default (100ms) or a positive duration", prefix, b.InitialInterval)
	case b.MaxInterval < b.InitialInterval:
		return invalid("%s.MaxInterval (%v) is less than InitialInterval (%v); raise MaxInterval or lower InitialInterval", prefix, b.MaxInterval, b.InitialInterval)
	case b.Multiplier < 1:
		return invalid("%s.Multiplier (%v) is less than 1; use 0 for the default (2) or a value of at least 1", prefix, b.Multiplier)
	}
	return nil
}

// Delay returns the wait before retry number attempt, counting from 0:
// InitialInterval × Multiplier^attempt, capped at MaxInterval. Zero fields
// count as their defaults, and a negative attempt as 0. [DeadLetter] and
// [Idempotency] space their retries with it; use it to retry something of
// your own on the same schedule. It does not validate b: the Validate
// methods of the configs that hold a Backoff do.
func (b Backoff) Delay(attempt int) time.Duration {
	b.setDefaults()
	d := float64(b.InitialInterval)
	for range max(attempt, 0) {
		if b.Multiplier <= 1 {
			break
		}
		d *= b.Multiplier
		if d >= float64(b.MaxInterval) {
			return b.MaxInterval
		}
	}
	return min(time.Duration(d), b.MaxInterval)
}

// sleep waits for d or until ctx is done, and reports whether it waited the
// whole time.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
