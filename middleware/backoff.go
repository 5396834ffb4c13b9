package middleware

import (
	"math/rand/v2"
	"time"
)

// Defaults of [Backoff].
const (
	DefaultInitialInterval = 100 * time.Millisecond
	DefaultMaxInterval     = 10 * time.Second
	DefaultMultiplier      = 2.0
)

// Backoff is an exponential backoff with equal jitter: the nominal n-th
// wait (from 0) is InitialInterval × Multiplier^n, capped at MaxInterval,
// and the actual wait is drawn between half of it and all of it
// ([Backoff.Delay]; the package doc says why). The zero value is the
// default.
type Backoff struct {
	// InitialInterval is the first nominal wait. Default
	// [DefaultInitialInterval].
	InitialInterval time.Duration
	// MaxInterval caps every nominal wait. Default [DefaultMaxInterval].
	MaxInterval time.Duration
	// Multiplier grows the nominal wait after each retry. Default
	// [DefaultMultiplier]; at least 1.
	Multiplier float64
}

func (b *Backoff) setDefaults() {
	if b.InitialInterval == 0 {
		b.InitialInterval = DefaultInitialInterval
	}
	if b.MaxInterval == 0 {
		b.MaxInterval = DefaultMaxInterval
	}
	if b.Multiplier == 0 {
		b.Multiplier = DefaultMultiplier
	}
}

// Validate reports the first invalid field of b, zero fields counting as
// their defaults, with an error that wraps [ErrInvalidConfig]. The configs
// that hold a Backoff validate it too.
func (b Backoff) Validate() error { return b.validate("Backoff") }

// validate is Validate with the path of the field that holds b.
func (b Backoff) validate(path string) error {
	b.setDefaults()
	switch {
	case b.InitialInterval < 0:
		return invalid("%s.InitialInterval is negative (%v); use 0 for the default (%v) or a positive duration", path, b.InitialInterval, DefaultInitialInterval)
	case b.MaxInterval < 0:
		return invalid("%s.MaxInterval is negative (%v); use 0 for the default (%v) or a duration of at least InitialInterval", path, b.MaxInterval, DefaultMaxInterval)
	case b.MaxInterval < b.InitialInterval:
		return invalid("%s.MaxInterval (%v) is less than InitialInterval (%v); raise MaxInterval or lower InitialInterval", path, b.MaxInterval, b.InitialInterval)
	case b.Multiplier < 1:
		return invalid("%s.Multiplier (%v) is less than 1; use 0 for the default (%v) or a value of at least 1", path, b.Multiplier, DefaultMultiplier)
	}
	return nil
}

// Delay returns the wait before retry number attempt, counting from 0: a
// random duration between half the nominal wait and the nominal wait,
// InitialInterval × Multiplier^attempt capped at MaxInterval. Zero fields
// count as their defaults, and a negative attempt as 0. It does not
// validate b.
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
