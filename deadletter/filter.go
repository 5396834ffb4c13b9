package deadletter

import (
	"slices"
	"strings"
	"time"

	"github.com/koto-dev/watermill-koto/internal/config"
)

// Filter selects dead letters for [Queue.List] and [Queue.Replay]. A zero
// field selects everything; the fields that are set must all match.
type Filter struct {
	// Since and Until bound the time a dead letter failed
	// ([Letter.FailedAtOrTimestamp]): Since <= t < Until.
	Since, Until time.Time
	// Reason selects dead letters whose reason contains it, ignoring case.
	Reason string
	// ErrorClass selects one error class, such as "poison", ignoring case.
	ErrorClass string
	// TypeName selects one cqrs type name, such as "order-placed".
	TypeName string
	// UUIDs selects dead letters with one of these message UUIDs.
	UUIDs []string
	// Limit stops after this many matches: List returns at most Limit, and
	// Replay sends at most Limit (a canary replay of one, say). 0: no limit.
	Limit int
}

// Match reports whether l passes every condition of f but Limit.
func (f Filter) Match(l *Letter) bool {
	t := l.FailedAtOrTimestamp()
	switch {
	case !f.Since.IsZero() && t.Before(f.Since),
		!f.Until.IsZero() && !t.Before(f.Until),
		f.Reason != "" && !strings.Contains(strings.ToLower(l.Reason), strings.ToLower(f.Reason)),
		f.ErrorClass != "" && !strings.EqualFold(l.ErrorClass, f.ErrorClass),
		f.TypeName != "" && l.TypeName != f.TypeName,
		len(f.UUIDs) > 0 && !slices.Contains(f.UUIDs, l.UUID):
		return false
	}
	return true
}

// Validate reports a negative Limit or a time range that ends before it
// starts.
func (f Filter) Validate() error {
	p := config.For("deadletter.Filter")
	if f.Limit < 0 {
		p.Add("Limit", "is negative (%d); use 0 for no limit", f.Limit)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		p.Add("Since", "(%s) is not before Until (%s)", f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
	}
	return p.Err()
}
