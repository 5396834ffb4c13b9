package console

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"
)

// plan returns the action that reads the selection of a replay or discard
// form, runs it dry to count what it would send (or discard) and where,
// and shows the confirmation.
func (h *Handler) plan(k jobKind) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		group := r.PathValue("group")
		q, err := h.groupQueue(group)
		if err != nil {
			return err
		}
		if err := r.ParseForm(); err != nil {
			return badRequest(err.Error())
		}
		f, what, err := h.selection(r.Context(), group, r.PostForm)
		if err != nil {
			return err
		}
		j, err := dryRun(r.Context(), q, k, f)
		if err != nil {
			return err
		}
		j.Group, j.Who, j.What = group, who(r), what
		j.Command = command(k, group, h.cfg.Mapping, f)
		if k == kindReplay {
			j.AlsoRead = h.alsoRead(group, j.Targets)
		}
		h.jobs.add(j)
		http.Redirect(w, r, basePath(r)+"/replays/"+j.ID, http.StatusSeeOther)
		return nil
	}
}

// dryRun runs job k of f dry on q, up to the ends that q's topic has now,
// and returns the job it plans, which reads up to the same ends: so it
// takes no dead letter that arrived since, which the confirmation did not
// count. Offsets bound it exactly where a time (f.Until at the plan's
// time, or just after the newest dead letter counted) would not: a dead
// letter's time is the clock of the consumer that failed it, not the
// console's or the broker's, and one published late can be older than
// those counted.
func dryRun(ctx context.Context, q *queue, k jobKind, f filter) (*job, error) {
	ends, err := endsOf(ctx, q)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	plan, err := resolve(ctx, q, k, f, replayOptions{DryRun: true, Ends: ends, Progress: func(p replayProgress) {
		for _, t := range sentTo(p) {
			counts[t]++
		}
	}})
	if err != nil {
		return nil, err
	}
	return &job{Kind: k, Filter: f, Ends: ends, Plan: plan, Targets: targets(counts)}, nil
}

// alsoRead returns the groups other than group that consume the topics
// of ts, as the last snapshot knows them: a replay reaches them too.
func (h *Handler) alsoRead(group string, ts []target) []string {
	var out []string
	for _, g := range h.history.last().Groups {
		if g.Name == group {
			continue
		}
		for _, p := range g.Partitions {
			sent := slices.ContainsFunc(ts, func(t target) bool { return t.Topic == p.Topic })
			if sent && !slices.Contains(out, g.Name) {
				out = append(out, g.Name)
			}
		}
	}
	return out
}

// startReplay starts a confirmed replay, or discard, in the background.
func (h *Handler) startReplay(w http.ResponseWriter, r *http.Request) error {
	j := h.jobs.get(r.PathValue("id"))
	if j == nil {
		return notFound("no such replay: the console forgets replays when it restarts")
	}
	if err := h.jobs.start(j); err != nil {
		return err
	}
	by := cmp.Or(who(r), "-")
	h.cfg.Logger.Info("console: "+string(j.Kind)+" started", "who", by, "remote", r.RemoteAddr, "group", j.Group,
		"what", j.What, "planned", j.Plan.Sent+j.Plan.Discarded, "targets", j.Targets, "replay", j.ID)
	h.wg.Go(func() { h.runReplay(j, by) })
	http.Redirect(w, r, basePath(r)+"/replays/"+j.ID, http.StatusSeeOther)
	return nil
}

// runReplay runs j on a queue of its own, so that the pages of its group
// do not wait for it, up to the ends its dry run read.
func (h *Handler) runReplay(j *job, by string) {
	q, err := openQueue(h.cfg, j.Group)
	var res replayResult
	if err == nil {
		res, err = resolve(h.ctx, q, j.Kind, j.Filter, replayOptions{Ends: j.Ends, Progress: j.progress})
		_ = q.Close()
	}
	j.finish(res, err)
	h.metrics.ended(j.Kind, j.Group, res, err)
	log := h.cfg.Logger.Info
	if err != nil {
		log = h.cfg.Logger.Error
	}
	log("console: "+string(j.Kind)+" ended", "who", by, "group", j.Group, "what", j.What, "sent", res.Sent,
		"discarded", res.Discarded, "already_replayed", res.AlreadyReplayed, "already_discarded", res.AlreadyDiscarded,
		"unroutable", res.Unroutable, "error", err, "replay", j.ID)
}

// replayData is a replay's page: its confirmation, progress or result.
type replayData struct {
	Job    *job
	Status jobStatus
}

func (h *Handler) replayPage(w http.ResponseWriter, r *http.Request) error {
	j := h.jobs.get(r.PathValue("id"))
	if j == nil {
		return notFound("no such replay: the console forgets replays when it restarts")
	}
	title := "Replay of " + j.Group
	if j.Kind == kindDiscard {
		title = "Discard of " + j.Group
	}
	return h.render(w, r, http.StatusOK, "replay.html", title, replayData{Job: j, Status: j.status()})
}

// replayStatus serves a replay's progress as JSON for the page's script.
func (h *Handler) replayStatus(w http.ResponseWriter, r *http.Request) error {
	j := h.jobs.get(r.PathValue("id"))
	if j == nil {
		return notFound("no such replay")
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(j.status())
}

// replaysData lists the replays the console remembers.
type replaysData struct {
	Jobs []replayData
	Now  time.Time
}

func (h *Handler) replaysPage(w http.ResponseWriter, r *http.Request) error {
	var d replaysData
	for _, j := range h.jobs.all() {
		d.Jobs = append(d.Jobs, replayData{Job: j, Status: j.status()})
	}
	return h.render(w, r, http.StatusOK, "replays.html", "Replays", d)
}
