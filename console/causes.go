package console

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// cause is the dead letters of a group that failed the same way: the same
// error class, and the same reason once masked.
type cause struct {
	ID     string // stable, for links
	Class  string
	Reason string // masked
	// ErrorTypes and TypeNames are those of its dead letters, sorted.
	ErrorTypes, TypeNames []string
	Count, Pending        int // all, and those neither replayed nor discarded
	First, Last           time.Time
	letters               []*letter
}

// groupByCause returns the causes of letters, the most recent failure
// first.
func groupByCause(letters []*letter) []*cause {
	byID := map[string]*cause{}
	var out []*cause
	for _, l := range letters {
		c := byID[l.Cause]
		if c == nil {
			c = &cause{ID: l.Cause, Class: l.ErrorClass, Reason: maskReason(l.Reason)}
			byID[l.Cause] = c
			out = append(out, c)
		}
		c.add(l)
	}
	slices.SortFunc(out, func(a, b *cause) int {
		return cmp.Or(b.Last.Compare(a.Last), strings.Compare(a.ID, b.ID))
	})
	return out
}

func (c *cause) add(l *letter) {
	t := l.FailedAtOrTimestamp()
	if c.Count == 0 || t.Before(c.First) {
		c.First = t
	}
	if t.After(c.Last) {
		c.Last = t
	}
	c.Count++
	if !l.Replayed && !l.Discarded {
		c.Pending++
	}
	c.ErrorTypes = insertSorted(c.ErrorTypes, l.ErrorType)
	c.TypeNames = insertSorted(c.TypeNames, l.TypeName)
	c.letters = append(c.letters, l)
}

func insertSorted(s []string, v string) []string {
	if v == "" {
		return s
	}
	i, found := slices.BinarySearch(s, v)
	if found {
		return s
	}
	return slices.Insert(s, i, v)
}
