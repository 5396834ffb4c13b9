package console

import (
	"cmp"
	"context"
	"errors"
	"net/http"

	"github.com/koto-dev/watermill-koto/parking"
)

// parkedLimit is the most parked messages a group's page reads.
const parkedLimit = 500

// parkedData is a group's page of parked messages.
type parkedData struct {
	Group   string
	Entries []parkedEntry
	Cut     bool
	Limit   int
}

// parkedPage lists the messages parked for a group, in every parking
// table of Config.OutboxSchemas, each key's in the order they come back.
func (h *Handler) parkedPage(w http.ResponseWriter, r *http.Request) error {
	group := r.PathValue("group")
	stores, err := h.parkingStores(r.Context())
	if err != nil {
		return err
	}
	d := parkedData{Group: group, Limit: parkedLimit}
	for _, s := range stores {
		entries, err := s.List(r.Context(), group, parkedLimit+1)
		if err != nil {
			return err
		}
		d.Entries = append(d.Entries, entries...)
	}
	if len(d.Entries) > parkedLimit {
		d.Entries, d.Cut = d.Entries[:parkedLimit], true
	}
	return h.render(w, r, http.StatusOK, "parked.html", "Parked for "+group, d)
}

// runParked brings a parked message back now.
func (h *Handler) runParked(w http.ResponseWriter, r *http.Request) error {
	return h.operateParked(w, r, "run", (*parking.Store).RunNow)
}

// deadLetterParked brings a parked message back to be dead-lettered.
func (h *Handler) deadLetterParked(w http.ResponseWriter, r *http.Request) error {
	return h.operateParked(w, r, "dead-letter", (*parking.Store).DeadLetter)
}

// operateParked does op to the parked message of the request, in the
// table that holds it, logs it with who asked, and goes back to the
// group's page.
func (h *Handler) operateParked(w http.ResponseWriter, r *http.Request, what string, op func(*parking.Store, context.Context, string) error) error {
	group, id := r.PathValue("group"), r.PathValue("id")
	if h.cfg.Pool == nil {
		return notFound("no database configured")
	}
	stores, err := h.parkingStores(r.Context())
	if err != nil {
		return err
	}
	err = errors.New("no parking table found")
	for _, s := range stores {
		if err = op(s, r.Context(), id); !isNotParked(err) {
			break
		}
	}
	switch {
	case isNotParked(err):
		return notFound(err.Error())
	case isNotFirst(err):
		return badRequest(err.Error())
	case err != nil:
		return err
	}
	h.cfg.Logger.Info("console: parked message "+what, "who", cmp.Or(who(r), "-"), "remote", r.RemoteAddr, "group", group, "id", id)
	http.Redirect(w, r, basePath(r)+"/parked/"+group, http.StatusSeeOther)
	return nil
}

// parkingStores returns the parking tables of Config.OutboxSchemas.
func (h *Handler) parkingStores(ctx context.Context) ([]*parking.Store, error) {
	if h.cfg.Pool == nil {
		return nil, nil
	}
	return parkingStores(ctx, h.cfg.Pool, h.cfg.OutboxSchemas)
}
