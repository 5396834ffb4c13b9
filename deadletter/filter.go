package deadletter

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/koto-dev/watermill-koto/internal/config"
)

// Filter selects dead letters for [Queue.List], [Queue.Replay] and
// [Queue.Discard]. A zero field selects everything; the fields that are
// set must all match.
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
	// CorrelationID selects the dead letters of one correlation ID.
	CorrelationID string
	// Cause selects the dead letters of one cause ([Letter].Cause).
	Cause string
	// Positions selects the dead letters at these positions of the
	// dead-letter topic.
	Positions []Position
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
		len(f.UUIDs) > 0 && !slices.Contains(f.UUIDs, l.UUID),
		f.CorrelationID != "" && l.CorrelationID != f.CorrelationID,
		f.Cause != "" && l.Cause != f.Cause,
		len(f.Positions) > 0 && !slices.Contains(f.Positions, l.Position()):
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

// Position is where a dead letter is in the dead-letter topic.
type Position struct {
	Partition int32
	Offset    int64
}

// String returns p as PARTITION/OFFSET, such as "0/42".
func (p Position) String() string { return fmt.Sprintf("%d/%d", p.Partition, p.Offset) }

// positionText is what ParsePosition reads.
var positionText = regexp.MustCompile(`^(\d+)/(\d+)$`)

// ParsePosition reads a position written as PARTITION/OFFSET, such as
// "0/42".
func ParsePosition(s string) (Position, error) {
	m := positionText.FindStringSubmatch(s)
	if m == nil {
		return Position{}, fmt.Errorf("deadletter: position %q is not PARTITION/OFFSET, such as 0/42", s)
	}
	partition, perr := strconv.ParseInt(m[1], 10, 32)
	offset, oerr := strconv.ParseInt(m[2], 10, 64)
	if perr != nil || oerr != nil {
		return Position{}, fmt.Errorf("deadletter: position %q: partition or offset out of range", s)
	}
	return Position{Partition: int32(partition), Offset: offset}, nil
}
