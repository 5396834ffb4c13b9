package console

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
)

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
	d := letterData{Group: group, Letter: l, Cause: l.Cause, Payload: viewPayload(l.Payload), From: l.ReplayedFrom}
	for _, k := range slices.Sorted(maps.Keys(l.Metadata)) {
		d.Metadata = append(d.Metadata, [2]string{k, l.Metadata[k]})
	}
	return h.render(w, r, http.StatusOK, "letter.html", fmt.Sprintf("%s: dead letter %d/%d", group, partition, offset), d)
}
