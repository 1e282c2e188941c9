package plot

import (
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"io"
	"slices"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// panelTitleFontSize is the size of a panel's policy name: smaller than the
// figure's title so the hierarchy reads at a glance.
const panelTitleFontSize = 12

// metric is one of the three GPU counts of a Usage.
type metric struct {
	// label is the legend entry.
	label string
	// series picks the metric's series out of a Usage.
	series func(Usage) Series
	// color is fixed per metric, not per policy, so the same quantity has
	// the same color in every panel.
	color color.RGBA
}

// metrics are a Usage's GPU counts in drawing order: partial last so the
// waste is drawn on top where lines overlap.
func metrics() []metric {
	return []metric{
		{label: "busy", series: func(u Usage) Series { return u.Busy }, color: color.RGBA{R: 0, G: 158, B: 115, A: 255}},
		{label: "idle", series: func(u Usage) Series { return u.Idle }, color: color.RGBA{R: 86, G: 180, B: 233, A: 255}},
		{label: "partial gangs", series: func(u Usage) Series { return u.Partial }, color: color.RGBA{R: 213, G: 94, B: 0, A: 255}},
	}
}

// usageLines is one policy's metrics in plot coordinates, in metrics order.
type usageLines struct {
	policy string
	lines  []plotter.XYs
}

// Utilization writes, in format ("svg" or "png"), a figure of GPU use over
// time with one panel per policy, stacked vertically in policy name order.
// Each panel shows the busy, idle and partial-gang GPU counts against hours
// since the start; all panels share their axis ranges so heights compare
// across policies. The figure is 20cm wide and 6cm high per policy.
func Utilization(w io.Writer, format string, title string, usages []Usage) error {
	return utilization(w, format, title, usages, nil)
}

// utilization draws Utilization's figure over the whole run, or within
// win when it is set.
func utilization(w io.Writer, format string, title string, usages []Usage, win *Window) error {
	if err := checkFormat(format); err != nil {
		return fmt.Errorf("utilization plot: %w", err)
	}
	panels, err := usagePanels(usages, win)
	if err != nil {
		return fmt.Errorf("utilization plot: %w", err)
	}
	height := panelHeight * vg.Length(len(panels))
	err = render(w, format, utilizationWidth, height, func(dc draw.Canvas) {
		top := drawHeading(dc, title)
		tiles := draw.Tiles{
			Rows: len(panels), Cols: 1,
			PadTop: top, PadBottom: margin, PadLeft: margin, PadRight: margin, PadY: margin,
		}
		grid := make([][]*gplot.Plot, len(panels))
		for i, p := range panels {
			grid[i] = []*gplot.Plot{p}
		}
		// Align, rather than plain tiles, lines up the panels' data areas
		// even when their y tick labels differ in width.
		canvases := gplot.Align(grid, tiles, dc)
		for i, p := range panels {
			p.Draw(canvases[i][0])
		}
	})
	if err != nil {
		return fmt.Errorf("utilization plot: %w", err)
	}
	return nil
}

// drawHeading draws title centered at the top of dc and returns the height
// it takes, margins included, for the panels to leave free.
func drawHeading(dc draw.Canvas, title string) vg.Length {
	if title == "" {
		return margin
	}
	sty := headingStyle()
	dc.FillText(sty, vg.Point{X: dc.Center().X, Y: dc.Max.Y - margin}, title)
	return margin + sty.Height(title) + margin
}

// usagePanels validates usages and builds one plot per policy, in policy
// name order, with common axis ranges: the whole run, or win when set.
func usagePanels(usages []Usage, win *Window) ([]*gplot.Plot, error) {
	if len(usages) == 0 {
		return nil, errors.New("no policies to plot")
	}
	sorted := slices.Clone(usages)
	slices.SortStableFunc(sorted, func(a, b Usage) int { return cmp.Compare(a.Policy, b.Policy) })
	names := make([]string, len(sorted))
	for i, u := range sorted {
		names[i] = u.Policy
	}
	if err := checkNames("policy", names); err != nil {
		return nil, err
	}
	all := make([]usageLines, len(sorted))
	var xMax, yMax float64
	for i, u := range sorted {
		ul, err := toUsageLines(u)
		if err != nil {
			return nil, err
		}
		x, y := xyBounds(ul.lines...)
		xMax, yMax = max(xMax, x), max(yMax, y)
		all[i] = ul
	}
	if xMax == 0 {
		// A run sampled only at its start still gets an hour-wide axis
		// rather than gonum's [-1, 1] default for an empty range.
		xMax = 1
	}
	xMin := 0.0
	if win != nil {
		xMin, xMax, yMax = win.From.Hours(), win.To.Hours(), 0
		for _, ul := range all {
			yMax = max(yMax, windowYMax(win, ul.lines))
		}
	}
	panels := make([]*gplot.Plot, len(all))
	for i, ul := range all {
		panels[i] = usagePanel(ul, xMin, xMax, axisTop(yMax))
	}
	return panels, nil
}

// toUsageLines converts u's metrics to plot coordinates in hours.
func toUsageLines(u Usage) (usageLines, error) {
	ul := usageLines{policy: u.Policy}
	for _, m := range metrics() {
		s := m.series(u)
		if len(s.Points) == 0 {
			return usageLines{}, fmt.Errorf("no samples for policy %q: its %s series is empty", u.Policy, m.label)
		}
		xys, err := hourXYs(s)
		if err != nil {
			return usageLines{}, fmt.Errorf("policy %q, %s series: %w", u.Policy, m.label, err)
		}
		ul.lines = append(ul.lines, xys)
	}
	return ul, nil
}

// usagePanel is the plot of one policy's metrics, on axes from xMin to
// xMax hours and 0 to yTop GPUs.
func usagePanel(ul usageLines, xMin, xMax, yTop float64) *gplot.Plot {
	p := newPlot(ul.policy, "hours", "GPUs")
	p.Title.TextStyle.Font.Size = vg.Points(panelTitleFontSize)
	for i, m := range metrics() {
		line := stepLine(ul.lines[i], draw.LineStyle{Color: m.color, Width: vg.Points(lineWidth)})
		p.Add(line)
		p.Legend.Add(m.label, line)
	}
	// Set after Add, which widens the axes to the panel's own data: the
	// common ranges are what make the panels comparable.
	p.X.Min, p.X.Max = xMin, xMax
	p.Y.Min, p.Y.Max = 0, yTop
	return p
}
