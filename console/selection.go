package console

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"time"
)

// selection reads what a replay form selects and returns the filter that
// replays exactly that, and its description. The form's scope is
// "letter" (uuid and at: one dead letter), "selected" (uuid, repeated:
// the boxes ticked in the list) or "matching" (the list's query, a cause
// included: all it shows).
func (h *Handler) selection(ctx context.Context, group string, form url.Values) (filter, string, error) {
	switch form.Get("scope") {
	case "letter":
		at, err := time.Parse(time.RFC3339Nano, form.Get("at"))
		if err != nil || form.Get("uuid") == "" {
			return filter{}, "", badRequest("a replay of one dead letter needs its uuid and at")
		}
		// The UUID and the failure time, to the nanosecond, select this
		// dead letter alone, and not another failure of the same message.
		return filter{UUIDs: []string{form.Get("uuid")}, Since: at, Until: at.Add(time.Nanosecond)}, "dead letter " + form.Get("uuid"), nil
	case "selected":
		uuids := slices.DeleteFunc(form["uuid"], func(s string) bool { return s == "" })
		if len(uuids) == 0 {
			return filter{}, "", badRequest("no dead letter selected: tick the ones to replay")
		}
		return filter{UUIDs: uuids}, fmt.Sprintf("%d selected dead letters", len(uuids)), nil
	case "matching":
		return h.matching(ctx, group, readListQuery(form))
	}
	return filter{}, "", badRequest("scope must be letter, selected or matching")
}

// matching returns the filter of a list query. A cause cannot be said in
// a deadletter filter, so its dead letters are listed and selected by
// UUID, class and time span.
func (h *Handler) matching(ctx context.Context, group string, q listQuery) (filter, string, error) {
	f, err := q.filter()
	if err != nil || q.Cause == "" {
		return f, describe(q, nil), err
	}
	ls, c, _, err := h.selectLetters(ctx, group, q)
	if err != nil {
		return f, "", err
	}
	if c == nil {
		return f, "", notFound("no dead letter of " + group + " has that cause now")
	}
	f.ErrorClass = c.Class
	f.Since, f.Until = later(f.Since, c.First), earlier(f.Until, c.Last.Add(time.Nanosecond))
	for _, l := range ls {
		if l.UUID != "" && !slices.Contains(f.UUIDs, l.UUID) {
			f.UUIDs = append(f.UUIDs, l.UUID)
		}
	}
	return f, describe(q, c), nil
}

func later(a, b time.Time) time.Time {
	if a.IsZero() || b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// describe says in words what a list query selects.
func describe(q listQuery, c *cause) string {
	s := "every dead letter"
	if c != nil {
		s = fmt.Sprintf("the dead letters that failed with %s %q", c.Class, c.Reason)
	}
	for _, part := range [][2]string{{"type", q.Type}, {"class", q.Class}, {"reason containing", q.Text}, {"since", q.Since}, {"until", q.Until}} {
		if part[1] != "" {
			s += fmt.Sprintf(", %s %q", part[0], part[1])
		}
	}
	return s
}
