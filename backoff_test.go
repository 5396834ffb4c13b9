package koto_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"
)

// TestBackoffDelay: each delay lies between half the nominal wait and the
// nominal wait, InitialInterval × Multiplier^attempt capped at MaxInterval.
func TestBackoffDelay(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		b       koto.Backoff
		attempt int
		nominal time.Duration
	}{
		{koto.Backoff{}, 0, 100 * ms}, // zero fields are the defaults: 100 ms, ×2, 10 s
		{koto.Backoff{}, 3, 800 * ms},
		{koto.Backoff{}, 50, 10 * time.Second},
		{koto.Backoff{}, -1, 100 * ms},
		{koto.Backoff{InitialInterval: 10 * ms, Multiplier: 3}, 2, 90 * ms},
		{koto.Backoff{InitialInterval: 10 * ms, MaxInterval: 25 * ms}, 2, 25 * ms},
		{koto.Backoff{InitialInterval: 10 * ms, Multiplier: 1}, 1000, 10 * ms},
	}
	for _, c := range cases {
		for range 200 {
			if got := c.b.Delay(c.attempt); got < c.nominal/2 || got > c.nominal {
				t.Fatalf("%+v.Delay(%d) = %v, want within [%v, %v]", c.b, c.attempt, got, c.nominal/2, c.nominal)
			}
		}
	}
}

// TestBackoffJitterSpreads: consumers that fail together do not retry
// together. 1000 draws of one delay cover its whole range, [d/2, d],
// evenly: each tenth of the range gets some, and none gets most. (For a
// uniform draw each tenth expects 100; the bounds below fail a correct
// draw with a probability far below 1e-9.)
func TestBackoffJitterSpreads(t *testing.T) {
	b := koto.Backoff{InitialInterval: time.Second, MaxInterval: time.Second}
	const n, bins = 1000, 10
	var count [bins]int
	lo, span := time.Second/2, time.Second/2
	for range n {
		d := b.Delay(0)
		i := min(int((d-lo)*bins/(span+1)), bins-1)
		count[i]++
	}
	for _, c := range count {
		if c < 40 || c > 200 {
			t.Fatalf("delays per tenth of [%v, %v]: %v; want each near %d", lo, lo+span, count, n/bins)
		}
	}
}

// TestBackoffValidate: the zero value and explicit values are valid; every
// invalid field is reported at once, each on a line that says what to
// change, in an error that wraps ErrInvalidConfig.
func TestBackoffValidate(t *testing.T) {
	const prefix = "invalid configuration: koto.Backoff."
	cases := []struct {
		name string
		b    koto.Backoff
		want []string // lines of the error; none for valid
	}{
		{"zero value", koto.Backoff{}, nil},
		{"explicit", koto.Backoff{InitialInterval: time.Millisecond, MaxInterval: time.Millisecond, Multiplier: 1}, nil},
		{"initial above the default max", koto.Backoff{InitialInterval: 20 * time.Second}, []string{
			"MaxInterval (10s) is less than InitialInterval (20s); raise MaxInterval or lower InitialInterval",
		}},
		{"max below initial", koto.Backoff{InitialInterval: time.Second, MaxInterval: time.Millisecond}, []string{
			"MaxInterval (1ms) is less than InitialInterval (1s); raise MaxInterval or lower InitialInterval",
		}},
		{"negative multiplier", koto.Backoff{Multiplier: -1}, []string{
			"Multiplier (-1) is less than 1; use 0 for the default (2) or a value of at least 1",
		}},
		{"every field", koto.Backoff{InitialInterval: -1, MaxInterval: -1, Multiplier: 0.5}, []string{
			"InitialInterval is negative (-1ns); use 0 for the default (100ms) or a positive duration",
			"MaxInterval is negative (-1ns); use 0 for the default (10s) or a duration of at least InitialInterval",
			"Multiplier (0.5) is less than 1; use 0 for the default (2) or a value of at least 1",
		}},
	}
	for _, c := range cases {
		err := c.b.Validate()
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: Validate() = %v, want nil", c.name, err)
			}
			continue
		}
		want := prefix + strings.Join(c.want, "\n"+prefix)
		if err == nil || err.Error() != want || !errors.Is(err, koto.ErrInvalidConfig) {
			t.Errorf("%s: Validate() = %v\nwant %s\nwrapping ErrInvalidConfig", c.name, err, want)
		}
	}
}
