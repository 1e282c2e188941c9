package plot

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"gonum.org/v1/plot/plotter"
)

// Window is a span of a run's time axis.
type Window struct {
	From, To time.Duration
}

// BurstWindow finds the busiest short stretch of the runs, for a figure
// zoomed onto it: over a trace of weeks, a burst of an hour is a hair-wide
// spike on the full time axis, and its partial gangs and idle GPUs cannot
// be read. Activity is the GPUs held (busy plus partial gangs), summed
// over the policies at each sample time. The burst is the stretch around
// the highest sample in which activity stays above halfway between the
// median and the peak; the window pads it on each side by its own width
// (at least 1 % of the run). ok is false when there is no burst to zoom
// onto: a flat run, or a window that would already take a quarter or more
// of the full axis, where the full figure shows it well enough.
func BurstWindow(usages []Usage) (w Window, ok bool) {
	held := map[time.Duration]float64{}
	for _, u := range usages {
		for _, s := range []Series{u.Busy, u.Partial} {
			for _, p := range s.Points {
				held[p.At] += p.Value
			}
		}
	}
	at := slices.Sorted(maps.Keys(held))
	if len(at) < 3 {
		return Window{}, false
	}
	v := make([]float64, len(at))
	for i, t := range at {
		v[i] = held[t]
	}
	peak := 0
	for i := range v {
		if v[i] > v[peak] {
			peak = i
		}
	}
	sorted := slices.Clone(v)
	slices.Sort(sorted)
	median := sorted[len(sorted)/2]
	if v[peak] <= median {
		return Window{}, false
	}
	half := median + (v[peak]-median)/2
	a, b := peak, peak
	for a > 0 && v[a-1] >= half {
		a--
	}
	for b < len(v)-1 && v[b+1] >= half {
		b++
	}
	// A sample holds until the next one, so the burst ends where the
	// first sample after it starts.
	from, to := at[a], at[min(b+1, len(at)-1)]
	span := at[len(at)-1] - at[0]
	pad := max(to-from, span/100)
	w = Window{From: max(at[0], from-pad), To: min(at[len(at)-1], to+pad)}
	if 4*(w.To-w.From) >= span {
		return Window{}, false
	}
	return w, true
}

// UtilizationIn is Utilization with the time axis cut to win, and the GPU
// axis scaled to what the panels hold within it, so that a burst fills the
// figure. The title should say the figure is a zoom.
func UtilizationIn(w io.Writer, format string, title string, usages []Usage, win Window) error {
	if win.To <= win.From || win.From < 0 {
		return fmt.Errorf("utilization plot: window %s to %s is empty or negative", win.From, win.To)
	}
	return utilization(w, format, title, usages, &win)
}

// windowYMax is the highest value of the step lines within win (hours),
// counting the step held into the window from the sample before it.
func windowYMax(win *Window, lines []plotter.XYs) float64 {
	var top float64
	from, to := win.From.Hours(), win.To.Hours()
	for _, xys := range lines {
		for i, p := range xys {
			next := to
			if i+1 < len(xys) {
				next = xys[i+1].X
			}
			if p.X <= to && next >= from {
				top = max(top, p.Y)
			}
		}
	}
	return top
}
