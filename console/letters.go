package console

import (
	"context"
	"net/http"
)

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
