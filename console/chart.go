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

// minChartSpan is the shortest time a chart spans, so that the first
// samples of a console just started do not fill it.
const minChartSpan = time.Minute

// chart is an inline SVG line of a series over the last hour.
type chart struct {
	Points        string // the polyline's points attribute
	Max, Last     int64
	Samples       int
	Since         time.Time // where the time axis starts
	Width, Height int
}

// newChart draws points on a time axis that ends at now and starts at the
// first sample, an hour ago at most, from 0 up to the largest value.
func newChart(points []point, now time.Time) chart {
	c := chart{Samples: len(points), Width: chartWidth, Height: chartHeight}
	span := historyWindow
	if len(points) > 0 {
		span = min(max(now.Sub(points[0].At), minChartSpan), historyWindow)
	}
	start := now.Add(-span)
	c.Since = start
	for _, p := range points {
		c.Max = max(c.Max, p.Value)
	}
	if len(points) > 0 {
		c.Last = points[len(points)-1].Value
	}
	var b strings.Builder
	for i, p := range points {
		x := float64(p.At.Sub(start)) / float64(span) * chartWidth
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
