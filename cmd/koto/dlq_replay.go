package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/koto-dev/watermill-koto/deadletter"
)

// replayReport is the JSON of replay and discard.
type replayReport struct {
	Action      string                  `json:"action"` // replay or discard
	Topic       string                  `json:"topic"`
	ReplayGroup string                  `json:"replay_group"`
	Result      deadletter.ReplayResult `json:"result"`
	Sent        []deadletter.Replayed   `json:"sent"`
	Discarded   []*deadletter.Letter    `json:"discarded"`
	Unroutable  []*deadletter.Letter    `json:"unroutable"`
	Error       string                  `json:"error,omitempty"`
}

// runResolve returns the run of replay, or of discard.
func runResolve(discard bool) func(ctx context.Context, cio cmdIO, d *dlqFlags) error {
	name, call := "replay", (*deadletter.Queue).Replay
	if discard {
		name, call = "discard", (*deadletter.Queue).Discard
	}
	return func(ctx context.Context, cio cmdIO, d *dlqFlags) error {
		if d.batch < 0 {
			return usageError(fmt.Sprintf("-batch is %d; use 0 for the default or a positive count", d.batch))
		}
		q, f, err := d.openFiltered(name)
		if err != nil {
			return err
		}
		defer q.Close()
		report := replayReport{Action: name, Topic: q.Topic(), ReplayGroup: q.ReplayGroup(),
			Sent: []deadletter.Replayed{}, Discarded: []*deadletter.Letter{}, Unroutable: []*deadletter.Letter{}}
		var bar *progressBar
		if d.progress.or(cio.stderrIsTerminal) {
			bar = newProgressBar(cio.stderr, discard)
		}
		res, err := call(q, ctx, f, deadletter.ReplayOptions{DryRun: d.dryRun, Progress: func(p deadletter.ReplayProgress) {
			report.progress(cio, d, bar, p)
		}})
		bar.finish()
		if errors.Is(err, deadletter.ErrNoTopic) {
			return err // nothing to report
		}
		report.Result = res
		if d.json {
			if err != nil {
				report.Error = err.Error()
			}
			if jerr := writeJSON(cio.stdout, report); jerr != nil {
				return jerr
			}
			return err
		}
		if terr := report.dryRunTable(cio, d); terr != nil {
			return terr
		}
		fmt.Fprintln(cio.stdout, summary(report))
		return err
	}
}

// progress takes what a replay or discard reports: it warns of the
// unroutable dead letters, keeps the others for the end (with -json or
// -dry-run), or prints them (with -v), and moves the bar.
func (r *replayReport) progress(cio cmdIO, d *dlqFlags, bar *progressBar, p deadletter.ReplayProgress) {
	for _, l := range p.Unroutable {
		bar.clear()
		if l.Dropped != "" {
			fmt.Fprintf(cio.stderr, "koto: not replayed: %s holds no payload (%s); the message is still at %s\n", position(l), l.Dropped, original(l))
			continue
		}
		fmt.Fprintf(cio.stderr, "koto: not replayed: %s has no original topic (a record the dead-letter middleware did not write)\n", position(l))
	}
	switch {
	case d.json || d.dryRun: // print them all at the end
		r.Sent = append(r.Sent, p.Sent...)
		r.Discarded = append(r.Discarded, p.Discarded...)
		r.Unroutable = append(r.Unroutable, p.Unroutable...)
	case d.verbose:
		for _, s := range p.Sent {
			bar.clear()
			fmt.Fprintf(cio.stdout, "sent %s %s to %s/%d/%d\n", position(s.Letter), orDash(s.UUID), s.ToTopic, s.ToPartition, s.ToOffset)
		}
		for _, l := range p.Discarded {
			bar.clear()
			fmt.Fprintf(cio.stdout, "discarded %s %s\n", position(l), orDash(l.UUID))
		}
	}
	bar.update(p.Result)
}

// dryRunTable prints, after a dry run, what it would send or discard.
func (r *replayReport) dryRunTable(cio cmdIO, d *dlqFlags) error {
	if !d.dryRun {
		return nil
	}
	if len(r.Discarded) > 0 {
		return letterTable(cio.stdout, r.Discarded, nil)
	}
	if len(r.Sent) == 0 {
		return nil
	}
	letters := make([]*deadletter.Letter, len(r.Sent))
	for i, s := range r.Sent {
		letters[i] = s.Letter
	}
	return letterTable(cio.stdout, letters, func(i int) string { return r.Sent[i].ToTopic })
}

// summary says in one line what the replay or discard did.
func summary(r replayReport) string {
	res := r.Result
	if r.Action == "discard" {
		verb, tail := "discarded", "recorded in "+r.ReplayGroup+"; nothing sent or deleted"
		if res.DryRun {
			verb, tail = "dry run: would discard", "nothing recorded"
		}
		return fmt.Sprintf("%s %s of %s; %d selected already replayed, %d already discarded; read %d of %d; %s",
			verb, deadLetters(res.Discarded), r.Topic, res.AlreadyReplayed, res.AlreadyDiscarded, res.Scanned, res.ToScan, tail)
	}
	verb, tail := "sent", "recorded in "+r.ReplayGroup
	if res.DryRun {
		verb, tail = "dry run: would send", "nothing sent or recorded"
	}
	return fmt.Sprintf("%s %s from %s; %d selected already replayed, %d discarded, %d without an original topic; read %d of %d; %s",
		verb, deadLetters(res.Sent), r.Topic, res.AlreadyReplayed, res.AlreadyDiscarded, res.Unroutable, res.Scanned, res.ToScan, tail)
}

// deadLetters is "1 dead letter" or "n dead letters".
func deadLetters(n int) string {
	if n == 1 {
		return "1 dead letter"
	}
	return fmt.Sprintf("%d dead letters", n)
}
