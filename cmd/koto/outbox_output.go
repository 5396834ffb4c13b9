package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/koto-dev/watermill-koto/outbox"
)

// statusTable writes one line per outbox table.
func statusTable(w io.Writer, statuses []outbox.Status) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tWAITING\tHELD\tOLDEST\tLAG\tSCHEDULED\tSCHEDULED SINCE\tNEXT DUE\tFORWARDER")
	for _, s := range statuses {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\t%s\t%s\t%s\n", s.Table, s.Waiting, s.Held, orDash(formatTime(s.Oldest)),
			s.Lag.Round(time.Millisecond), s.Scheduled, orDash(formatTime(s.OldestScheduled)), orDash(formatTime(s.NextDue)), forwarder(s.Forwarder))
	}
	return tw.Flush()
}

// forwarder describes the active forwarder.
func forwarder(f *outbox.ActiveForwarder) string {
	switch {
	case f == nil:
		return "none active"
	case f.ApplicationName == "":
		return fmt.Sprintf("pid %d", f.PID)
	}
	return fmt.Sprintf("pid %d (%s)", f.PID, f.ApplicationName)
}

// shownStatus is the JSON of one table's status.
type shownStatus struct {
	Table          string                `json:"table"`
	Waiting        int64                 `json:"waiting"`
	Held           int64                 `json:"held"`
	Oldest         *time.Time            `json:"oldest"`
	LagSeconds     float64               `json:"lag_seconds"`
	Scheduled      int64                 `json:"scheduled"`
	ScheduledSince *time.Time            `json:"scheduled_since"`
	NextDue        *time.Time            `json:"next_due"`
	Forwarder      *shownActiveForwarder `json:"forwarder"`
}

type shownActiveForwarder struct {
	PID             int32  `json:"pid"`
	ApplicationName string `json:"application_name"`
}

func jsonStatuses(statuses []outbox.Status) []shownStatus {
	out := make([]shownStatus, len(statuses))
	for i, s := range statuses {
		out[i] = shownStatus{Table: s.Table, Waiting: s.Waiting, Held: s.Held, LagSeconds: s.Lag.Seconds(), Scheduled: s.Scheduled,
			Oldest: utcOrNil(s.Oldest), ScheduledSince: utcOrNil(s.OldestScheduled), NextDue: utcOrNil(s.NextDue)}
		if f := s.Forwarder; f != nil {
			out[i].Forwarder = &shownActiveForwarder{PID: f.PID, ApplicationName: f.ApplicationName}
		}
	}
	return out
}

// utcOrNil is t in UTC, or nil for the zero time.
func utcOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
