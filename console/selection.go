package console

import (
	"context"
	"fmt"
	"net/url"
)

// selection reads what a replay or discard form selects and returns the
// filter that selects exactly that, and its description. The form's scope
// is "letter" (at: one dead letter's position), "selected" (at, repeated:
// the boxes ticked in the list) or "matching" (the list's query, a cause
// included: all it shows). The filter is the one that koto dlq's flags
// make of the same selection.
func (h *Handler) selection(ctx context.Context, group string, form url.Values) (filter, string, error) {
	switch form.Get("scope") {
	case "letter":
		at, err := parsePosition(form.Get("at"))
		if err != nil {
			return filter{}, "", badRequest("one dead letter is named by its position, at=PARTITION/OFFSET: " + err.Error())
		}
		return filter{Positions: []position{at}}, "dead letter " + at.String(), nil
	case "selected":
		var ps []position
		for _, s := range form["at"] {
			at, err := parsePosition(s)
			if err != nil {
				return filter{}, "", badRequest(err.Error())
			}
			ps = append(ps, at)
		}
		if len(ps) == 0 {
			return filter{}, "", badRequest("no dead letter selected: tick the ones to select")
		}
		return filter{Positions: ps}, fmt.Sprintf("%d selected dead letters", len(ps)), nil
	case "matching":
		return h.matching(ctx, group, readListQuery(form))
	}
	return filter{}, "", badRequest("scope must be letter, selected or matching")
}

// matching returns the filter of a list query, and its description, which
// names the query's cause as its dead letters show it now.
func (h *Handler) matching(ctx context.Context, group string, q listQuery) (filter, string, error) {
	f, err := q.filter()
	if err != nil || q.Cause == "" {
		return f, describe(q, nil), err
	}
	_, c, _, err := h.selectLetters(ctx, group, q)
	if err != nil {
		return f, "", err
	}
	if c == nil {
		return f, "", notFound("no dead letter of " + group + " has that cause now")
	}
	return f, describe(q, c), nil
}

// describe says in words what a list query selects.
func describe(q listQuery, c *cause) string {
	s := "every dead letter"
	if c != nil {
		s = fmt.Sprintf("the dead letters that failed with %s %q", c.Class, c.Reason)
	}
	for _, part := range [][2]string{{"type", q.Type}, {"UUID", q.UUID}, {"correlation ID", q.Correlation}, {"class", q.Class}, {"reason containing", q.Text}, {"since", q.Since}, {"until", q.Until}} {
		if part[1] != "" {
			s += fmt.Sprintf(", %s %q", part[0], part[1])
		}
	}
	return s
}
