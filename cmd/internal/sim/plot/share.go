package plot

import (
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"io"
	"maps"
	"math"
	"slices"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// weightLegend is the legend entry explaining the dashed reference lines.
const weightLegend = "weight share (dashed)"

// ShareSummary is one tenant's share over the run, as the report's table
// gives it: Mean is its share of the GPUs held and Entitled its weight's
// share, both averaged over the same samples, so that each sums to 1 over
// the tenants.
type ShareSummary struct {
	Mean, Entitled float64
}

// Share writes, in format ("svg" or "png"), each tenant's share of the
// cluster's GPUs over time (hours), one line per tenant in name order, with a
// dashed horizontal line in the tenant's color at its entitled (weight)
// share. The legend gives each tenant's mean and entitled share in percent,
// rounded by Percents as the report's table is, so the figure and the table
// show the same numbers. Every tenant in shares must have a summary. The
// figure is 16×10cm.
func Share(w io.Writer, format string, title string, shares []Series, summary map[string]ShareSummary) error {
	if err := checkFormat(format); err != nil {
		return fmt.Errorf("share plot: %w", err)
	}
	p, err := sharePlot(title, shares, summary)
	if err != nil {
		return fmt.Errorf("share plot: %w", err)
	}
	if err := render(w, format, figureWidth, figureHeight, p.Draw); err != nil {
		return fmt.Errorf("share plot: %w", err)
	}
	return nil
}

// sharePlot validates its inputs and builds the share plot.
func sharePlot(title string, shares []Series, summary map[string]ShareSummary) (*gplot.Plot, error) {
	if len(shares) == 0 {
		return nil, errors.New("no tenants to plot")
	}
	sorted := slices.Clone(shares)
	slices.SortStableFunc(sorted, func(a, b Series) int { return cmp.Compare(a.Name, b.Name) })
	names := make([]string, len(sorted))
	for i, s := range sorted {
		names[i] = s.Name
	}
	if err := checkNames("tenant", names); err != nil {
		return nil, err
	}
	if err := checkSummary(summary); err != nil {
		return nil, err
	}
	mean, entitled := summaryPercents(summary)
	lines := make([]plotter.XYs, len(sorted))
	for i, s := range sorted {
		if _, ok := summary[s.Name]; !ok {
			return nil, fmt.Errorf("no share summary for tenant %q", s.Name)
		}
		if len(s.Points) == 0 {
			return nil, fmt.Errorf("no samples for tenant %q", s.Name)
		}
		var err error
		if lines[i], err = hourXYs(s); err != nil {
			return nil, fmt.Errorf("tenant %q: %w", s.Name, err)
		}
	}
	xMax, yMax := xyBounds(lines...)
	if xMax == 0 {
		// A run sampled only at its start still gets an hour-wide axis.
		xMax = 1
	}
	p := newPlot(title, "hours", "share of GPUs")
	for i, name := range names {
		line := stepLine(lines[i], seriesStyle(i))
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s: %.1f%% (weight %.1f%%)", name, mean[name], entitled[name]), line)
		fair := summary[name].Entitled
		yMax = max(yMax, fair)
		p.Add(weightLine(fair, xMax, seriesStyle(i).Color))
	}
	p.Legend.Add(weightLegend, weightLine(0, 0, color.Gray{Y: 100}))
	p.X.Min, p.X.Max = 0, xMax
	// A share cannot pass 1, so the legend's headroom stops there unless
	// the data itself does not.
	p.Y.Min, p.Y.Max = 0, max(yMax, min(1, axisTop(yMax)))
	return p, nil
}

// checkSummary refuses shares that are not fractions.
func checkSummary(summary map[string]ShareSummary) error {
	for _, name := range slices.Sorted(maps.Keys(summary)) {
		s := summary[name]
		for _, v := range []float64{s.Mean, s.Entitled} {
			if math.IsNaN(v) || v < 0 || v > 1 {
				return fmt.Errorf("tenant %q has share %v: shares must be between 0 and 1", name, v)
			}
		}
	}
	return nil
}

// summaryPercents are the tenants' mean and entitled shares in percent,
// each set rounded by Percents.
func summaryPercents(summary map[string]ShareSummary) (mean, entitled map[string]float64) {
	names := slices.Sorted(maps.Keys(summary))
	m, e := make([]float64, len(names)), make([]float64, len(names))
	for i, n := range names {
		m[i], e[i] = summary[n].Mean, summary[n].Entitled
	}
	m, e = Percents(m), Percents(e)
	mean, entitled = map[string]float64{}, map[string]float64{}
	for i, n := range names {
		mean[n], entitled[n] = m[i], e[i]
	}
	return mean, entitled
}

// Percents turns shares that make up a whole into percentages to one
// decimal that sum to exactly 100.0, by the largest-remainder method: each
// gets its share of 1000 tenths rounded down, and the tenths left go to
// the largest remainders (ties to the earlier). Rounding each on its own
// can sum to 99.9 or 100.1. Shares are normalized by their sum first;
// all-zero shares stay zero.
func Percents(shares []float64) []float64 {
	var sum float64
	for _, s := range shares {
		sum += max(0, s)
	}
	out := make([]float64, len(shares))
	if sum <= 0 || math.IsNaN(sum) || math.IsInf(sum, 0) {
		return out
	}
	const tenths = 1000
	floors := make([]int, len(shares))
	rems := make([]float64, len(shares))
	left := tenths
	for i, s := range shares {
		exact := max(0, s) / sum * tenths
		floors[i] = int(math.Floor(exact))
		rems[i] = exact - float64(floors[i])
		left -= floors[i]
	}
	order := make([]int, len(shares))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rems[b], rems[a]) })
	for _, i := range order[:max(0, min(left, len(order)))] {
		floors[i]++
	}
	for i, f := range floors {
		out[i] = float64(f) / 10
	}
	return out
}

// weightLine is a dashed horizontal line at y from x 0 to xMax, thinner than
// the share lines so it reads as a reference, not data.
func weightLine(y, xMax float64, c color.Color) *plotter.Line {
	return &plotter.Line{
		XYs: plotter.XYs{{X: 0, Y: y}, {X: xMax, Y: y}},
		LineStyle: draw.LineStyle{
			Color:  c,
			Width:  vg.Points(1),
			Dashes: []vg.Length{vg.Points(4), vg.Points(4)},
		},
	}
}
