package console

import (
	"sync"
	"time"
)

// historyWindow is how far back the charts go.
const historyWindow = time.Hour

// history keeps the figures of the snapshots taken in the last hour, for
// the charts and /metrics.
type history struct {
	mu      sync.Mutex
	samples []sample
	latest  snapshot
}

// sample is one snapshot's figures, by series: see the *Series functions.
type sample struct {
	At     time.Time
	Values map[string]int64
}

func lagSeries(group string) string        { return "lag/" + group }
func deadLetterSeries(group string) string { return "dlq/" + group }
func waitingSeries(table string) string    { return "outbox/" + table }

// add records s, and forgets what is older than the window.
func (h *history) add(s snapshot) {
	v := map[string]int64{}
	for _, g := range s.Groups {
		v[lagSeries(g.Name)] = g.Lag
		v[deadLetterSeries(g.Name)] = g.DeadLetters
	}
	for _, o := range s.Outboxes {
		v[waitingSeries(o.Table)] = o.Waiting
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.At.After(h.latest.At) {
		h.latest = s
	}
	h.samples = append(h.samples, sample{At: s.At, Values: v})
	cut := 0
	for cut < len(h.samples) && s.At.Sub(h.samples[cut].At) > historyWindow {
		cut++
	}
	h.samples = h.samples[cut:]
}

// point is one value of a series.
type point struct {
	At    time.Time
	Value int64
}

// series returns the points of one series, oldest first.
func (h *history) series(name string) []point {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []point
	for _, s := range h.samples {
		if v, ok := s.Values[name]; ok {
			out = append(out, point{s.At, v})
		}
	}
	return out
}

// last returns the newest snapshot recorded.
func (h *history) last() snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latest
}
