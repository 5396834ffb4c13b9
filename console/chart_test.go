package console

import (
	"strings"
	"testing"
	"time"
)

func TestChart(t *testing.T) {
	now := time.Now()
	c := newChart([]point{{now.Add(-30 * time.Second), 0}, {now.Add(-15 * time.Second), 4}, {now, 2}}, now)
	// A minute's span for samples of half a minute: the first at the middle,
	// the largest value at the top, zero on the axis.
	if want := "80.0,31.0 120.0,1.0 160.0,16.0"; c.Points != want || c.Max != 4 || c.Last != 2 {
		t.Errorf("chart: points %q max %d last %d, want %q max 4 last 2", c.Points, c.Max, c.Last, want)
	}
	if old := newChart([]point{{now.Add(-2 * historyWindow), 1}, {now, 1}}, now); !strings.HasPrefix(old.Points, "0.0,") {
		t.Errorf("a sample older than the window is drawn at %q, want at the left edge", old.Points)
	}
}
