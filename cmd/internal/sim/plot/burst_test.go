package plot

import (
	"bytes"
	"testing"
	"time"
)

// hourly is a series of one sample an hour with value(h) at hour h.
func hourly(name string, hours int, value func(h int) float64) Series {
	s := Series{Name: name}
	for h := range hours {
		s.Points = append(s.Points, Point{At: time.Duration(h) * time.Hour, Value: value(h)})
	}
	return s
}

// usageOf is a policy's usage with the given busy series and nothing idle
// or partial.
func usageOf(policy string, busy Series) Usage {
	zero := hourly("zero", len(busy.Points), func(int) float64 { return 0 })
	return Usage{Policy: policy, Busy: busy, Idle: zero, Partial: zero}
}

func TestBurstWindow(t *testing.T) {
	const month = 30 * 24
	tests := []struct {
		name string
		busy func(h int) float64
		// burst must lie within the window; ok false wants no window.
		burstFrom, burstTo time.Duration
		ok                 bool
	}{
		{name: "a two-hour burst in a month of steady load", ok: true,
			busy:      func(h int) float64 { return map[bool]float64{true: 200, false: 10}[h >= 240 && h < 242] },
			burstFrom: 240 * time.Hour, burstTo: 242 * time.Hour},
		{name: "a burst on a noisy base", ok: true,
			busy: func(h int) float64 {
				return float64(10+h%7) + map[bool]float64{true: 300, false: 0}[h >= 600 && h < 606]
			},
			burstFrom: 600 * time.Hour, burstTo: 606 * time.Hour},
		{name: "flat", busy: func(int) float64 { return 64 }},
		{name: "busy for half the month", busy: func(h int) float64 { return map[bool]float64{true: 200, false: 10}[h >= month/2] }},
		{name: "idle", busy: func(int) float64 { return 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			usages := []Usage{usageOf("berth", hourly("busy", month, tt.busy)), usageOf("uncoordinated", hourly("busy", month, tt.busy))}
			win, ok := BurstWindow(usages)
			if ok != tt.ok {
				t.Fatalf("BurstWindow = %v, %v; want ok %v", win, ok, tt.ok)
			}
			if !ok {
				return
			}
			if win.From > tt.burstFrom || win.To < tt.burstTo {
				t.Errorf("window %s to %s does not hold the burst, %s to %s", win.From, win.To, tt.burstFrom, tt.burstTo)
			}
			// Zoomed: the burst takes a visible part of the axis.
			if w, b := win.To-win.From, tt.burstTo-tt.burstFrom; w > 10*b+month*time.Hour/50 {
				t.Errorf("window %s to %s is %s wide for a burst of %s", win.From, win.To, w, b)
			}
		})
	}
}

// TestUtilizationInZoomsBothAxes: the window sets the time axis, and the
// GPU axis fits what the window holds, not the run's highest value.
func TestUtilizationInZoomsBothAxes(t *testing.T) {
	busy := hourly("busy", 720, func(h int) float64 {
		switch {
		case h >= 240 && h < 242:
			return 40
		case h == 600:
			return 400
		}
		return 10
	})
	win := Window{From: 230 * time.Hour, To: 250 * time.Hour}
	panels, err := usagePanels([]Usage{usageOf("berth", busy)}, &win)
	if err != nil {
		t.Fatal(err)
	}
	p := panels[0]
	if p.X.Min != 230 || p.X.Max != 250 {
		t.Errorf("time axis %v to %v hours, want 230 to 250", p.X.Min, p.X.Max)
	}
	if p.Y.Max < 40 || p.Y.Max >= 400 {
		t.Errorf("GPU axis tops at %v, want the window's 40 with headroom, not the run's 400", p.Y.Max)
	}
	var buf bytes.Buffer
	if err := UtilizationIn(&buf, "svg", "zoomed", []Usage{usageOf("berth", busy)}, win); err != nil {
		t.Fatal(err)
	}
	if err := UtilizationIn(&buf, "svg", "zoomed", []Usage{usageOf("berth", busy)}, Window{From: time.Hour, To: time.Hour}); err == nil {
		t.Error("an empty window drew a figure")
	}
}
