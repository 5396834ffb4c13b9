package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
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
