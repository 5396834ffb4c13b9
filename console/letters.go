package console

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// groupLetters reads the dead letters of group that f selects, the
// newest first, at most ListLimit of them: cut says the limit was reached.
func (h *Handler) groupLetters(ctx context.Context, group string, f filter) (ls []*letter, cut bool, err error) {
	q, err := h.groupQueue(group)
	if err != nil {
		return nil, false, err
	}
	f.Limit = h.cfg.ListLimit
	if ls, err = listLetters(ctx, q, f); err != nil {
		return nil, false, err
	}
	slices.SortStableFunc(ls, func(a, b *letter) int { return b.FailedAtOrTimestamp().Compare(a.FailedAtOrTimestamp()) })
	return ls, len(ls) == h.cfg.ListLimit, nil
}

// groupQueue returns the queue of group, or a 404 when its dead-letter
// topic does not exist: reading it would create it on many clusters.
func (h *Handler) groupQueue(group string) (*queue, error) {
	topics, err := h.offsets.Topics()
	if err != nil {
		return nil, err
	}
	if !slices.Contains(topics, deadLetterTopic(group)) {
		return nil, notFound(fmt.Sprintf("consumer group %s has no dead-letter topic (%s): nothing has failed there", group, deadLetterTopic(group)))
	}
	return h.queues.get(group)
}

// groupData is the grouped view of one consumer group.
type groupData struct {
	Group  string
	Causes []*cause
	Total  int
	Cut    bool
	Limit  int
}

func (h *Handler) groupPage(w http.ResponseWriter, r *http.Request) error {
	group := r.PathValue("group")
	ls, cut, err := h.groupLetters(r.Context(), group, filter{})
	if err != nil {
		return err
	}
	d := groupData{Group: group, Causes: groupByCause(ls), Total: len(ls), Cut: cut, Limit: h.cfg.ListLimit}
	return h.render(w, r, http.StatusOK, "group.html", group, d)
}

// listQuery is the list's filter form, as typed.
type listQuery struct {
	Text, Class, Type, Since, Until, Cause string
}

// timeLayout is what a datetime-local input sends, read as UTC.
const timeLayout = "2006-01-02T15:04"

func readListQuery(v url.Values) listQuery {
	return listQuery{Text: v.Get("q"), Class: v.Get("class"), Type: v.Get("type"), Since: v.Get("since"), Until: v.Get("until"), Cause: v.Get("cause")}
}

// filter returns the deadletter filter of q; Cause is not in it.
func (q listQuery) filter() (filter, error) {
	f := filter{Reason: q.Text, ErrorClass: q.Class, TypeName: q.Type}
	var err error
	if f.Since, err = parseTime("since", q.Since); err != nil {
		return f, err
	}
	if f.Until, err = parseTime("until", q.Until); err != nil {
		return f, err
	}
	if err := f.Validate(); err != nil {
		return f, badRequest(err.Error())
	}
	return f, nil
}

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{timeLayout, timeLayout + ":05", time.RFC3339Nano} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, badRequest(fmt.Sprintf("%s: %q is not a time such as 2026-01-02T15:04 (UTC)", field, s))
}

// encode returns q as a query string.
func (q listQuery) encode() string {
	v := url.Values{}
	for k, s := range map[string]string{"q": q.Text, "class": q.Class, "type": q.Type, "since": q.Since, "until": q.Until, "cause": q.Cause} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

// selectLetters returns the dead letters of group that q selects, with
// the cause that q names, if any.
func (h *Handler) selectLetters(ctx context.Context, group string, q listQuery) ([]*letter, *cause, bool, error) {
	f, err := q.filter()
	if err != nil {
		return nil, nil, false, err
	}
	ls, cut, err := h.groupLetters(ctx, group, f)
	if err != nil || q.Cause == "" {
		return ls, nil, cut, err
	}
	for _, c := range groupByCause(ls) {
		if c.ID == q.Cause {
			return c.letters, c, cut, nil
		}
	}
	return nil, nil, cut, nil
}

// lettersData is the list of one group's dead letters.
type lettersData struct {
	Group   string
	Query   listQuery
	Encoded string // Query as a query string
	Letters []*letter
	Cause   *cause
	Cut     bool
	Limit   int
}

func (h *Handler) lettersPage(w http.ResponseWriter, r *http.Request) error {
	group := r.PathValue("group")
	q := readListQuery(r.URL.Query())
	ls, c, cut, err := h.selectLetters(r.Context(), group, q)
	if err != nil {
		return err
	}
	d := lettersData{Group: group, Query: q, Encoded: q.encode(), Letters: ls, Cause: c, Cut: cut, Limit: h.cfg.ListLimit}
	return h.render(w, r, http.StatusOK, "letters.html", group+": dead letters", d)
}

// letterData is one dead letter whole.
type letterData struct {
	Group    string
	Letter   *letter
	Cause    string
	Payload  payloadView
	Metadata [][2]string // sorted by key
	From     string      // the dead letter a replay sent this one from
}

func (h *Handler) letterPage(w http.ResponseWriter, r *http.Request) error {
	group := r.PathValue("group")
	partition, err1 := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	offset, err2 := strconv.ParseInt(r.PathValue("offset"), 10, 64)
	if err1 != nil || err2 != nil {
		return notFound("a dead letter is named by its partition and offset, such as /letters/0/42")
	}
	q, err := h.groupQueue(group)
	if err != nil {
		return err
	}
	l, err := showLetter(r.Context(), q, int32(partition), offset)
	if isNotFound(err) {
		return notFound(err.Error())
	}
	if err != nil {
		return err
	}
	d := letterData{Group: group, Letter: l, Cause: causeID(l), Payload: viewPayload(l.Payload), From: l.Metadata.Get(replayedFromKey)}
	for _, k := range slices.Sorted(maps.Keys(l.Metadata)) {
		d.Metadata = append(d.Metadata, [2]string{k, l.Metadata[k]})
	}
	return h.render(w, r, http.StatusOK, "letter.html", fmt.Sprintf("%s: dead letter %d/%d", group, partition, offset), d)
}
