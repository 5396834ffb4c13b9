package console

import (
	"fmt"
	"strings"
	"time"
)

// Size of a chart's drawing, in SVG user units.
const (
	chartWidth  = 160
	chartHeight = 32
)

// chart is an inline SVG line of a series over the last hour.
type chart struct {
	Points        string // the polyline's points attribute
	Max, Last     int64
	Samples       int
	Width, Height int
}

// newChart draws points on a time axis that ends at now and spans the
// history window, from 0 up to the largest value.
func newChart(points []point, now time.Time) chart {
	c := chart{Samples: len(points), Width: chartWidth, Height: chartHeight}
	for _, p := range points {
		c.Max = max(c.Max, p.Value)
	}
	if len(points) > 0 {
		c.Last = points[len(points)-1].Value
	}
	var b strings.Builder
	start := now.Add(-historyWindow)
	for i, p := range points {
		x := float64(p.At.Sub(start)) / float64(historyWindow) * chartWidth
		y := float64(chartHeight - 1)
		if c.Max > 0 {
			y = float64(chartHeight-1) - float64(p.Value)/float64(c.Max)*float64(chartHeight-2)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", min(max(x, 0), chartWidth), y)
	}
	c.Points = b.String()
	return c
}
