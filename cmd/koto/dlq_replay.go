package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/koto-dev/watermill-koto/deadletter"
)

// replayReport is the JSON of replay.
type replayReport struct {
	Topic       string                  `json:"topic"`
	ReplayGroup string                  `json:"replay_group"`
	Result      deadletter.ReplayResult `json:"result"`
	Sent        []deadletter.Replayed   `json:"sent"`
	Unroutable  []*deadletter.Letter    `json:"unroutable"`
	Error       string                  `json:"error,omitempty"`
}

func runReplay(ctx context.Context, cio cmdIO, d *dlqFlags) error {
	if d.batch < 0 {
		return usageError(fmt.Sprintf("-batch is %d; use 0 for the default or a positive count", d.batch))
	}
	q, f, err := d.openFiltered("replay")
	if err != nil {
		return err
	}
	defer q.Close()

	report := replayReport{Topic: q.Topic(), ReplayGroup: q.ReplayGroup(), Sent: []deadletter.Replayed{}, Unroutable: []*deadletter.Letter{}}
	var bar *progressBar
	if d.progress.or(cio.stderrIsTerminal) {
		bar = newProgressBar(cio.stderr)
	}
	keep := d.json || d.dryRun // print them all at the end
	res, err := q.Replay(ctx, f, deadletter.ReplayOptions{DryRun: d.dryRun, Progress: func(p deadletter.ReplayProgress) {
		for _, l := range p.Unroutable {
			bar.clear()
			if l.Dropped != "" {
				fmt.Fprintf(cio.stderr, "koto: not replayed: %s holds no payload (%s); the message is still at %s\n", position(l), l.Dropped, original(l))
				continue
			}
			fmt.Fprintf(cio.stderr, "koto: not replayed: %s has no original topic (a record the dead-letter middleware did not write)\n", position(l))
		}
		if keep {
			report.Sent = append(report.Sent, p.Sent...)
			report.Unroutable = append(report.Unroutable, p.Unroutable...)
		} else if d.verbose {
			for _, r := range p.Sent {
				bar.clear()
				fmt.Fprintf(cio.stdout, "sent %s %s to %s/%d/%d\n", position(r.Letter), orDash(r.UUID), r.ToTopic, r.ToPartition, r.ToOffset)
			}
		}
		bar.update(p.Result)
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
	if d.dryRun && len(report.Sent) > 0 {
		letters := make([]*deadletter.Letter, len(report.Sent))
		for i, r := range report.Sent {
			letters[i] = r.Letter
		}
		if terr := letterTable(cio.stdout, letters, func(i int) string { return report.Sent[i].ToTopic }); terr != nil {
			return terr
		}
	}
	fmt.Fprintln(cio.stdout, summary(report))
	return err
}

// summary says in one line what the replay did.
func summary(r replayReport) string {
	res := r.Result
	verb, tail := "sent", "recorded in "+r.ReplayGroup
	if res.DryRun {
		verb, tail = "dry run: would send", "nothing sent or recorded"
	}
	return fmt.Sprintf("%s %s from %s; %d selected already replayed, %d without an original topic; read %d of %d; %s",
		verb, deadLetters(res.Sent), r.Topic, res.AlreadyReplayed, res.Unroutable, res.Scanned, res.ToScan, tail)
}

// deadLetters is "1 dead letter" or "n dead letters".
func deadLetters(n int) string {
	if n == 1 {
		return "1 dead letter"
	}
	return fmt.Sprintf("%d dead letters", n)
}
