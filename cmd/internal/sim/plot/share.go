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

// Share writes, in format ("svg" or "png"), each tenant's share of the
// cluster's GPUs over time (hours), one line per tenant in name order, with a
// dashed horizontal line in the tenant's color at its weight share: its
// weight over the sum of all weights, tenants without a series included, as
// fair sharing divides among every tenant that has a weight. Every tenant in
// shares must have a weight. The figure is 16×10cm.
func Share(w io.Writer, format string, title string, shares []Series, weights map[string]float64) error {
	if err := checkFormat(format); err != nil {
		return fmt.Errorf("share plot: %w", err)
	}
	p, err := sharePlot(title, shares, weights)
	if err != nil {
		return fmt.Errorf("share plot: %w", err)
	}
	if err := render(w, format, figureWidth, figureHeight, p.Draw); err != nil {
		return fmt.Errorf("share plot: %w", err)
	}
	return nil
}

// sharePlot validates its inputs and builds the share plot.
func sharePlot(title string, shares []Series, weights map[string]float64) (*gplot.Plot, error) {
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
	total, err := totalWeight(weights)
	if err != nil {
		return nil, err
	}
	lines := make([]plotter.XYs, len(sorted))
	for i, s := range sorted {
		if _, ok := weights[s.Name]; !ok {
			return nil, fmt.Errorf("no weight for tenant %q", s.Name)
		}
		if len(s.Points) == 0 {
			return nil, fmt.Errorf("no samples for tenant %q", s.Name)
		}
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
		p.Legend.Add(name, line)
		fair := weights[name] / total
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

// totalWeight checks weights and returns their sum, which must be positive
// for weight shares to exist.
func totalWeight(weights map[string]float64) (float64, error) {
	var total float64
	for _, name := range slices.Sorted(maps.Keys(weights)) {
		wt := weights[name]
		if math.IsNaN(wt) || math.IsInf(wt, 0) || wt < 0 {
			return 0, fmt.Errorf("tenant %q has weight %v: weights must be finite and not negative", name, wt)
		}
		total += wt
	}
	if total <= 0 {
		return 0, errors.New("weights sum to 0: no tenant has a weight share")
	}
	return total, nil
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
