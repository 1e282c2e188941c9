package plot

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

// logSpan is the ratio of the largest to the smallest positive time to start
// above which the x axis turns logarithmic: past two decades a linear axis
// crushes the fast starts, which are most jobs, against the origin.
const logSpan = 100

// StartCDF writes, in format ("svg" or "png"), the empirical cumulative
// distribution of time to start, one line per policy in policy name order:
// for each time on the x axis (minutes), the fraction of the policy's jobs
// that had started by then. The x axis is logarithmic when the positive
// samples span more than two decades; jobs that started at once are then
// drawn at the axis's left edge. The figure is 16×10cm.
func StartCDF(w io.Writer, format string, title string, samples map[string][]time.Duration) error {
	if err := checkFormat(format); err != nil {
		return fmt.Errorf("start CDF plot: %w", err)
	}
	p, err := cdfPlot(title, samples)
	if err != nil {
		return fmt.Errorf("start CDF plot: %w", err)
	}
	if err := render(w, format, figureWidth, figureHeight, p.Draw); err != nil {
		return fmt.Errorf("start CDF plot: %w", err)
	}
	return nil
}

// cdfPlot validates samples and builds the CDF plot.
func cdfPlot(title string, samples map[string][]time.Duration) (*gplot.Plot, error) {
	if len(samples) == 0 {
		return nil, errors.New("no policies to plot")
	}
	names := slices.Sorted(maps.Keys(samples))
	if err := checkNames("policy", names); err != nil {
		return nil, err
	}
	lo, hi, err := startRange(names, samples)
	if err != nil {
		return nil, err
	}
	logScale := lo > 0 && hi/lo > logSpan
	xMin, xMax := 0.0, hi
	xLabel := "time to start (minutes)"
	switch {
	case logScale:
		// Whole decades at both ends make every major tick a labeled power
		// of ten.
		xMin = math.Pow10(decadeBelow(lo))
		xMax = math.Pow10(decadeAbove(hi))
		xLabel = "time to start (minutes, log scale)"
	case hi == 0:
		// Every job started at once: give the axis a minute's width rather
		// than gonum's [-1, 1] default for an empty range.
		xMax = 1
	}
	p := newPlot(title, xLabel, "fraction of jobs started")
	// CDFs rise toward the upper right, so the lower right stays clear.
	p.Legend.Top = false
	for i, name := range names {
		line := stepLine(ecdf(samples[name], xMin, xMax), seriesStyle(i))
		p.Add(line)
		p.Legend.Add(name, line)
	}
	if logScale {
		p.X.Scale = gplot.LogScale{}
		p.X.Tick.Marker = gplot.TickerFunc(decadeTicks)
	}
	p.X.Min, p.X.Max = xMin, xMax
	p.Y.Min, p.Y.Max = 0, 1
	return p, nil
}

// startRange checks each policy's samples and returns the smallest positive
// and the largest time to start over all of them, in minutes; lo is 0 when
// no sample is positive.
func startRange(names []string, samples map[string][]time.Duration) (lo, hi float64, err error) {
	for _, name := range names {
		ds := samples[name]
		if len(ds) == 0 {
			return 0, 0, fmt.Errorf("no samples for policy %q", name)
		}
		for _, d := range ds {
			if d < 0 {
				return 0, 0, fmt.Errorf("policy %q: time to start %v is negative", name, d)
			}
			m := d.Minutes()
			hi = max(hi, m)
			if m > 0 && (lo == 0 || m < lo) {
				lo = m
			}
		}
	}
	return lo, hi, nil
}

// ecdf is the empirical CDF of ds in minutes, as the corners of a step
// function: 0 before the smallest sample, (i+1)/n after the i-th smallest,
// and 1 on to end, so that every policy's curve spans the whole axis.
// Samples below floor are drawn at floor: a log axis cannot show 0, and
// clamping keeps immediate starts in the curve's initial jump.
func ecdf(ds []time.Duration, floor, end float64) plotter.XYs {
	mins := make([]float64, len(ds))
	for i, d := range ds {
		mins[i] = max(d.Minutes(), floor)
	}
	slices.Sort(mins)
	n := float64(len(mins))
	xys := make(plotter.XYs, 0, len(mins)+2)
	xys = append(xys, plotter.XY{X: mins[0], Y: 0})
	for i, m := range mins {
		xys = append(xys, plotter.XY{X: m, Y: float64(i+1) / n})
	}
	return append(xys, plotter.XY{X: end, Y: 1})
}

// logSlack absorbs Log10's rounding, which can land a hair off an exact power
// of ten (Log10(0.1) is just above -1) and shift a bound by a whole decade.
const logSlack = 1e-9

// decadeBelow is the exponent of the largest power of ten at most x > 0.
func decadeBelow(x float64) int {
	return int(math.Floor(math.Log10(x) + logSlack))
}

// decadeAbove is the exponent of the smallest power of ten at least x > 0.
func decadeAbove(x float64) int {
	return int(math.Ceil(math.Log10(x) - logSlack))
}

// decadeTicks marks a log axis from lo to hi: a labeled major tick at each
// power of ten and unlabeled minor ticks at its multiples 2 to 9. It replaces
// gonum's LogTicks, which truncates the exponent toward zero and so, below 1,
// leaves the first decade unlabeled.
func decadeTicks(lo, hi float64) []gplot.Tick {
	var ticks []gplot.Tick
	for e := decadeBelow(lo); math.Pow10(e) <= hi*(1+logSlack); e++ {
		decade := math.Pow10(e)
		for m := 1; m < 10; m++ {
			v := decade * float64(m)
			if v < lo*(1-logSlack) || v > hi*(1+logSlack) {
				continue
			}
			t := gplot.Tick{Value: v}
			if m == 1 {
				t.Label = strconv.FormatFloat(decade, 'f', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
