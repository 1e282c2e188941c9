// Package plot draws the figures of the coordination simulator's report: GPU
// use over time for each policy, the distribution of jobs' time to start, and
// tenants' shares of the cluster against their weights.
//
// It takes plain inputs (time series and duration samples) rather than the
// simulator's own types so that any part of the simulator can feed it without
// an import cycle, and it renders SVG or PNG through gonum.org/v1/plot.
// Policies, tenants and series are always drawn in sorted name order with a
// fixed palette, so the same input gives byte-identical output: reports can
// be diffed and checked in.
package plot

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Point is one sample of a time series.
type Point struct {
	// At is the offset of the sample from the start of the run.
	At time.Duration
	// Value is the sampled value.
	Value float64
}

// Series is a named time series.
type Series struct {
	// Name names the series: a tenant for Share, a metric elsewhere.
	Name string
	// Points are the samples. They need not be sorted; each is held until
	// the next one, as the simulator samples gauges.
	Points []Point
}

// Usage is one policy's GPU use over time.
type Usage struct {
	// Policy names the coordination policy, e.g. "berth".
	Policy string
	// Busy is the number of GPUs used by gangs whose pods all run.
	Busy Series
	// Idle is the number of allocatable GPUs nothing uses.
	Idle Series
	// Partial is the number of GPUs held by gangs only part of which runs:
	// the waste gang scheduling exists to avoid.
	Partial Series
}

// The formats the package renders.
const (
	formatSVG = "svg"
	formatPNG = "png"
)

// Figure sizes. A Utilization figure grows by one panel height per policy so
// every panel keeps a readable aspect whatever the number of policies.
const (
	utilizationWidth = 20 * vg.Centimeter
	panelHeight      = 6 * vg.Centimeter
	figureWidth      = 16 * vg.Centimeter
	figureHeight     = 10 * vg.Centimeter
)

// Layout lengths shared by the figures.
const (
	// margin separates panels from each other and from the figure edge.
	margin = 3 * vg.Millimeter
	// lineWidth, in points, is wider than gonum's 1pt default so lines
	// stay visible in a PNG scaled down in a report.
	lineWidth = 1.5
	// legendFontSize keeps legends small, as they sit inside the data area.
	legendFontSize = 8
	// headingFontSize is the size of a figure's title.
	headingFontSize = 14
	// legendHeadroom stretches the top of a y axis so the legend, drawn in
	// the upper corner, does not hide the data.
	legendHeadroom = 1.4
)

// formats lists the allowed output formats, sorted, for error messages.
func formats() []string {
	return []string{formatPNG, formatSVG}
}

// checkFormat reports an error naming the allowed formats if format is not
// one of them. It runs before any drawing so a typo fails fast.
func checkFormat(format string) error {
	if !slices.Contains(formats(), format) {
		return fmt.Errorf("unknown format %q: allowed formats are %s",
			format, strings.Join(formats(), ", "))
	}
	return nil
}

// newCanvas returns an empty canvas of the given size in format. The
// canvases are built directly rather than through gonum's format registry so
// the set of formats is exactly the one checkFormat allows.
func newCanvas(format string, w, h vg.Length) (vg.CanvasWriterTo, error) {
	switch format {
	case formatSVG:
		// Fonts are not embedded: embedding makes every file carry the
		// whole font, and viewers substitute a close one anyway.
		return vgsvg.New(w, h), nil
	case formatPNG:
		return vgimg.PngCanvas{Canvas: vgimg.New(w, h)}, nil
	default:
		return nil, checkFormat(format)
	}
}

// render draws a w×h figure with drawFn and writes it to out in format.
func render(out io.Writer, format string, w, h vg.Length, drawFn func(draw.Canvas)) error {
	cw, err := newCanvas(format, w, h)
	if err != nil {
		return err
	}
	drawFn(draw.New(cw))
	if _, err := cw.WriteTo(out); err != nil {
		return fmt.Errorf("write %s: %w", format, err)
	}
	return nil
}

// palette is the fixed sequence of line colors: the Okabe–Ito colorblind-safe
// palette without its yellow, which is too faint on white. It is a function
// rather than a variable so no caller can change it for the others.
func palette() []color.RGBA {
	return []color.RGBA{
		{R: 0, G: 114, B: 178, A: 255},   // blue
		{R: 213, G: 94, B: 0, A: 255},    // vermillion
		{R: 0, G: 158, B: 115, A: 255},   // bluish green
		{R: 204, G: 121, B: 167, A: 255}, // reddish purple
		{R: 230, G: 159, B: 0, A: 255},   // orange
		{R: 86, G: 180, B: 233, A: 255},  // sky blue
		{R: 0, G: 0, B: 0, A: 255},       // black
	}
}

// seriesStyle is the style of the i-th series in sorted name order. Past the
// end of the palette the colors repeat with a different dash pattern, so
// series stay distinguishable however many there are.
func seriesStyle(i int) draw.LineStyle {
	colors := palette()
	dashes := [][]vg.Length{
		nil,
		{vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2)},
		{vg.Points(1), vg.Points(2)},
	}
	return draw.LineStyle{
		Color:  colors[i%len(colors)],
		Width:  vg.Points(lineWidth),
		Dashes: dashes[(i/len(colors))%len(dashes)],
	}
}

// headingStyle is the text style of figure titles.
func headingStyle() text.Style {
	sty := text.Style{
		Color:   color.Black,
		Font:    gplot.DefaultFont,
		XAlign:  draw.XCenter,
		YAlign:  draw.YTop,
		Handler: gplot.DefaultTextHandler,
	}
	sty.Font.Size = vg.Points(headingFontSize)
	return sty
}

// newPlot returns a plot with the package's common look: titled, labeled,
// with a light grid and a small legend in the upper right corner.
func newPlot(title, xLabel, yLabel string) *gplot.Plot {
	p := gplot.New()
	p.Title.Text = title
	p.Title.TextStyle = headingStyle()
	p.Title.Padding = margin
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(legendFontSize)
	p.Add(plotter.NewGrid())
	return p
}

// stepLine draws xys as a step function: a sampled gauge keeps its value
// until the next sample, so joining samples with slopes would show values
// that were never observed.
func stepLine(xys plotter.XYs, sty draw.LineStyle) *plotter.Line {
	return &plotter.Line{XYs: xys, StepStyle: plotter.PostStep, LineStyle: sty}
}

// hourXYs converts s to plot coordinates, x in hours since the start (the
// time unit of every time series figure), sorted by time. It rejects samples
// gonum could not place; callers check for an empty series themselves so the
// error can name the policy or tenant.
func hourXYs(s Series) (plotter.XYs, error) {
	pts := slices.Clone(s.Points)
	// Samplers emit in time order, but a merged or hand-built series may
	// not; sorting keeps a line from doubling back on itself.
	slices.SortStableFunc(pts, func(a, b Point) int { return cmp.Compare(a.At, b.At) })
	xys := make(plotter.XYs, len(pts))
	for i, p := range pts {
		if p.At < 0 {
			return nil, fmt.Errorf("sample at %v is before the start of the run", p.At)
		}
		if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
			return nil, fmt.Errorf("sample at %v has value %v, which is not finite", p.At, p.Value)
		}
		xys[i] = plotter.XY{X: p.At.Hours(), Y: p.Value}
	}
	return xys, nil
}

// checkNames reports an error for an empty or repeated name in sorted, which
// must be sorted. kind says what the names are, for the message.
func checkNames(kind string, sorted []string) error {
	for i, name := range sorted {
		if name == "" {
			return fmt.Errorf("a %s has an empty name", kind)
		}
		if i > 0 && sorted[i-1] == name {
			return fmt.Errorf("%s %q appears more than once", kind, name)
		}
	}
	return nil
}

// xyBounds returns the largest x and the largest y over all of sets, never
// below 0 since every axis of these figures starts at 0.
func xyBounds(sets ...plotter.XYs) (xMax, yMax float64) {
	for _, xys := range sets {
		for _, xy := range xys {
			xMax = max(xMax, xy.X)
			yMax = max(yMax, xy.Y)
		}
	}
	return xMax, yMax
}

// axisTop is the top of an axis showing values up to maxValue, with room for
// the legend; an all-zero series still gets a unit axis rather than gonum's
// [-1, 1] default for an empty range.
func axisTop(maxValue float64) float64 {
	if maxValue <= 0 {
		return 1
	}
	return maxValue * legendHeadroom
}
