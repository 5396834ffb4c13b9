package koto

import (
	"math/rand/v2"
	"time"

	"github.com/koto-dev/watermill-koto/internal/config"
)

// Defaults of [Backoff].
const (
	defaultInitialInterval = 100 * time.Millisecond
	defaultMaxInterval     = 10 * time.Second
	defaultMultiplier      = 2.0
)

// Backoff is the wait between retries: exponential with equal jitter (the
// package doc says why). The nominal n-th wait, from 0, is
// InitialInterval × Multiplier^n capped at MaxInterval, and [Backoff.Delay]
// draws the actual wait between half of it and all of it. The zero value
// is the default.
type Backoff struct {
	// InitialInterval is the first nominal wait. Default 100ms.
	InitialInterval time.Duration
	// MaxInterval caps every nominal wait. Default 10s.
	MaxInterval time.Duration
	// Multiplier grows the nominal wait after each retry; at least 1.
	// Default 2.
	Multiplier float64
}

func (b *Backoff) setDefaults() {
	if b.InitialInterval == 0 {
		b.InitialInterval = defaultInitialInterval
	}
	if b.MaxInterval == 0 {
		b.MaxInterval = defaultMaxInterval
	}
	if b.Multiplier == 0 {
		b.Multiplier = defaultMultiplier
	}
}

// Validate reports every invalid field of b, zero fields counting as their
// defaults, in an error that wraps [ErrInvalidConfig].
func (b Backoff) Validate() error {
	b.setDefaults()
	p := config.For("koto.Backoff")
	if b.InitialInterval < 0 {
		p.Add("InitialInterval", "is negative (%v); use 0 for the default (%v) or a positive duration", b.InitialInterval, defaultInitialInterval)
	}
	switch {
	case b.MaxInterval < 0:
		p.Add("MaxInterval", "is negative (%v); use 0 for the default (%v) or a duration of at least InitialInterval", b.MaxInterval, defaultMaxInterval)
	case b.MaxInterval < b.InitialInterval:
		p.Add("MaxInterval", "(%v) is less than InitialInterval (%v); raise MaxInterval or lower InitialInterval", b.MaxInterval, b.InitialInterval)
	}
	if b.Multiplier < 1 {
		p.Add("Multiplier", "(%v) is less than 1; use 0 for the default (%v) or a value of at least 1", b.Multiplier, defaultMultiplier)
	}
	return p.Err()
}

// Delay returns the wait before retry number attempt, counting from 0: a
// random duration between half the nominal wait and all of it. Zero fields
// count as their defaults, and a negative attempt as 0.
func (b Backoff) Delay(attempt int) time.Duration {
	d := b.nominal(attempt)
	half := d / 2
	return half + rand.N(d-half+1)
}

// nominal is the wait before retry number attempt without jitter.
func (b Backoff) nominal(attempt int) time.Duration {
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
