package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/koto-dev/watermill-koto/deadletter"
)

// progressInterval is the least time between two redraws of the bar.
const progressInterval = 100 * time.Millisecond

// barWidth is the number of cells in the bar.
const barWidth = 30

// progressBar draws a replay's progress on one line of a terminal. A nil
// bar draws nothing, so that callers need not check.
type progressBar struct {
	w     io.Writer
	drawn time.Time
	line  int                     // length of the line on screen
	last  deadletter.ReplayResult // the latest update
	shown deadletter.ReplayResult // what the line on screen shows
	seen  bool                    // last is set
	verb  string                  // what it counts: sent, or discarded
}

// newProgressBar returns the bar of a replay, or with discard of a
// discard.
func newProgressBar(w io.Writer, discard bool) *progressBar {
	if discard {
		return &progressBar{w: w, verb: "discarded"}
	}
	return &progressBar{w: w, verb: "sent"}
}

// update redraws the bar, at most every progressInterval.
func (b *progressBar) update(r deadletter.ReplayResult) {
	if b == nil {
		return
	}
	b.last, b.seen = r, true
	if time.Since(b.drawn) < progressInterval {
		return
	}
	b.drawn, b.shown = time.Now(), r
	frac := 1.0
	if r.ToScan > 0 {
		frac = min(float64(r.Scanned)/float64(r.ToScan), 1)
	}
	filled := int(frac * barWidth)
	verb, n := b.verb, r.Sent+r.Discarded
	if r.DryRun {
		verb = "would be " + verb
	}
	line := fmt.Sprintf("[%s%s] %3.0f%% %d/%d read, %s %d", strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled),
		frac*100, r.Scanned, r.ToScan, verb, n)
	pad := max(b.line-len(line), 0)
	fmt.Fprintf(b.w, "\r%s%s", line, strings.Repeat(" ", pad))
	b.line = len(line)
}

// clear erases the bar so that a line can be printed; the next update
// draws it again.
func (b *progressBar) clear() {
	if b == nil || b.line == 0 {
		return
	}
	fmt.Fprintf(b.w, "\r%s\r", strings.Repeat(" ", b.line))
	b.line, b.drawn = 0, time.Time{}
}

// finish draws the last state and leaves it on its own line.
func (b *progressBar) finish() {
	if b == nil || !b.seen {
		return
	}
	if b.line == 0 || b.shown != b.last {
		b.drawn = time.Time{}
		b.update(b.last)
	}
	fmt.Fprintln(b.w)
	b.line = 0
}
