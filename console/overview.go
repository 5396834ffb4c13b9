package console

import (
	"net/http"
)

// overviewData is the overview page: a snapshot read for it, and the
// charts of what the console sampled.
type overviewData struct {
	Snapshot snapshot
	Groups   []groupRow
	Outboxes []outboxRow
	Outbox   bool // a database is configured
	Interval string
}

type groupRow struct {
	groupState
	LagChart, DeadLetterChart chart
}

type outboxRow struct {
	outboxStatus
	WaitingChart chart
}

func (h *Handler) overviewPage(w http.ResponseWriter, r *http.Request) error {
	s := h.take(r.Context())
	h.history.add(s)
	d := overviewData{Snapshot: s, Outbox: h.cfg.Pool != nil, Interval: h.cfg.SampleInterval.String()}
	for _, g := range s.Groups {
		d.Groups = append(d.Groups, groupRow{
			groupState:      g,
			LagChart:        newChart(h.history.series(lagSeries(g.Name)), s.At),
			DeadLetterChart: newChart(h.history.series(deadLetterSeries(g.Name)), s.At),
		})
	}
	for _, o := range s.Outboxes {
		d.Outboxes = append(d.Outboxes, outboxRow{outboxStatus: o, WaitingChart: newChart(h.history.series(waitingSeries(o.Table)), s.At)})
	}
	return h.render(w, r, http.StatusOK, "overview.html", "Overview", d)
}
