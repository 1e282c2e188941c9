package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	gplot "gonum.org/v1/plot"
)

// series builds a Series sampled every hour from the start.
func series(name string, values ...float64) Series {
	s := Series{Name: name}
	for i, v := range values {
		s.Points = append(s.Points, Point{At: time.Duration(i) * time.Hour, Value: v})
	}
	return s
}

// usage builds a Usage with three samples an hour apart.
func usage(policy string, busy, idle, partial float64) Usage {
	return Usage{
		Policy:  policy,
		Busy:    series("busy", busy, busy+8, busy),
		Idle:    series("idle", idle, idle-8, idle),
		Partial: series("partial", partial, 0, partial),
	}
}

// sampleUsages are three policies given out of name order, to check sorting
// does not depend on input order.
func sampleUsages() []Usage {
	return []Usage{
		usage("uncoordinated", 40, 8, 16),
		usage("berth", 56, 8, 0),
		usage("quota-only", 48, 8, 8),
	}
}

// sampleStarts span more than two decades and include immediate starts, so
// the CDF's x axis is logarithmic.
func sampleStarts() map[string][]time.Duration {
	return map[string][]time.Duration{
		"uncoordinated": {0, 30 * time.Second, 40 * time.Minute, 6 * time.Hour},
		"quota-only":    {0, time.Minute, 20 * time.Minute, 2 * time.Hour},
		"berth":         {0, 0, 2 * time.Minute, 10 * time.Minute},
	}
}

// sampleShares are two tenants' shares over three hours.
func sampleShares() []Series {
	return []Series{
		series("team-b", 0.6, 0.5, 0.3),
		series("team-a", 0.2, 0.4, 0.6),
	}
}

// sampleSummary gives team-a a 3:1 weight share, and the shares' means.
func sampleSummary() map[string]ShareSummary {
	return map[string]ShareSummary{"team-a": {Mean: 0.4, Entitled: 0.75}, "team-b": {Mean: 0.6, Entitled: 0.25}}
}

// figure is one of the package's functions with its inputs bound.
type figure struct {
	name string
	draw func(w io.Writer, format string) error
	// want are strings the SVG must contain: the title and the names.
	want []string
	// width and height are the expected size in centimeters.
	width, height float64
}

// figures are the valid inputs each function is tested with.
func figures() []figure {
	return []figure{
		{
			name: "utilization",
			draw: func(w io.Writer, format string) error {
				return Utilization(w, format, "GPU use, trace A", sampleUsages())
			},
			want:  []string{"GPU use, trace A", "berth", "quota-only", "uncoordinated", "busy", "idle", "partial gangs"},
			width: 20, height: 18,
		},
		{
			name: "start CDF",
			draw: func(w io.Writer, format string) error {
				return StartCDF(w, format, "Time to start, trace A", sampleStarts())
			},
			want:  []string{"Time to start, trace A", "berth", "quota-only", "uncoordinated", "log scale"},
			width: 16, height: 10,
		},
		{
			name: "share",
			draw: func(w io.Writer, format string) error {
				return Share(w, format, "Tenant shares, trace A", sampleShares(), sampleSummary())
			},
			want:  []string{"Tenant shares, trace A", "team-a: 40.0% (weight 75.0%)", "team-b: 60.0% (weight 25.0%)", weightLegend, "stroke-dasharray"},
			width: 16, height: 10,
		},
	}
}

func TestSVG(t *testing.T) {
	for _, f := range figures() {
		t.Run(f.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := f.draw(&buf, "svg"); err != nil {
				t.Fatalf("draw: %v", err)
			}
			dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
			for {
				_, err := dec.Token()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("output is not valid XML: %v", err)
				}
			}
			for _, s := range f.want {
				if !strings.Contains(buf.String(), s) {
					t.Errorf("SVG does not contain %q", s)
				}
			}
		})
	}
}

func TestPNG(t *testing.T) {
	// pixels is a length in centimeters at vgimg's default 96 DPI.
	pixels := func(cm float64) int { return int(cm/2.54*96 + 0.5) }
	for _, f := range figures() {
		t.Run(f.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := f.draw(&buf, "png"); err != nil {
				t.Fatalf("draw: %v", err)
			}
			img, err := png.Decode(&buf)
			if err != nil {
				t.Fatalf("output is not a valid PNG: %v", err)
			}
			b := img.Bounds()
			if b.Dx() != pixels(f.width) || b.Dy() != pixels(f.height) {
				t.Errorf("size %dx%d px, want %dx%d (%gx%gcm)",
					b.Dx(), b.Dy(), pixels(f.width), pixels(f.height), f.width, f.height)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	for _, f := range figures() {
		t.Run(f.name, func(t *testing.T) {
			var first, second bytes.Buffer
			if err := f.draw(&first, "svg"); err != nil {
				t.Fatalf("first draw: %v", err)
			}
			if err := f.draw(&second, "svg"); err != nil {
				t.Fatalf("second draw: %v", err)
			}
			if !bytes.Equal(first.Bytes(), second.Bytes()) {
				t.Error("the same input gave different SVG")
			}
		})
	}
}

func TestInputOrderDoesNotMatter(t *testing.T) {
	reversed := sampleUsages()
	for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
		reversed[i], reversed[j] = reversed[j], reversed[i]
	}
	var a, b bytes.Buffer
	if err := Utilization(&a, "svg", "t", sampleUsages()); err != nil {
		t.Fatalf("draw: %v", err)
	}
	if err := Utilization(&b, "svg", "t", reversed); err != nil {
		t.Fatalf("draw reversed: %v", err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("reordering the policies changed the SVG")
	}
}

func TestErrors(t *testing.T) {
	withUsage := func(edit func(*Usage)) []Usage {
		us := sampleUsages()
		edit(&us[1])
		return us
	}
	tests := []struct {
		name string
		draw func(w io.Writer) error
		want string
	}{
		{"utilization unknown format", func(w io.Writer) error { return Utilization(w, "pdf", "t", sampleUsages()) }, `unknown format "pdf": allowed formats are png, svg`},
		{"utilization no policies", func(w io.Writer) error { return Utilization(w, "svg", "t", nil) }, "no policies to plot"},
		{"utilization empty series", func(w io.Writer) error {
			return Utilization(w, "svg", "t", withUsage(func(u *Usage) { u.Partial.Points = nil }))
		}, `no samples for policy "berth": its partial gangs series is empty`},
		{"utilization duplicate policy", func(w io.Writer) error {
			return Utilization(w, "svg", "t", withUsage(func(u *Usage) { u.Policy = "quota-only" }))
		}, `policy "quota-only" appears more than once`},
		{"utilization empty policy name", func(w io.Writer) error {
			return Utilization(w, "svg", "t", withUsage(func(u *Usage) { u.Policy = "" }))
		}, "a policy has an empty name"},
		{"utilization NaN", func(w io.Writer) error {
			return Utilization(w, "svg", "t", withUsage(func(u *Usage) { u.Busy.Points[1].Value = math.NaN() }))
		}, `policy "berth", busy series: sample at 1h0m0s has value NaN`},
		{"utilization negative offset", func(w io.Writer) error {
			return Utilization(w, "svg", "t", withUsage(func(u *Usage) { u.Idle.Points[0].At = -time.Minute }))
		}, "before the start of the run"},
		{"start CDF unknown format", func(w io.Writer) error { return StartCDF(w, "jpeg", "t", sampleStarts()) }, `unknown format "jpeg"`},
		{"start CDF no policies", func(w io.Writer) error { return StartCDF(w, "svg", "t", nil) }, "no policies to plot"},
		{"start CDF empty policy", func(w io.Writer) error {
			s := sampleStarts()
			s["berth"] = nil
			return StartCDF(w, "svg", "t", s)
		}, `no samples for policy "berth"`},
		{"start CDF negative", func(w io.Writer) error {
			s := sampleStarts()
			s["berth"] = []time.Duration{-time.Second}
			return StartCDF(w, "svg", "t", s)
		}, `policy "berth": time to start -1s is negative`},
		{"share unknown format", func(w io.Writer) error { return Share(w, "", "t", sampleShares(), sampleSummary()) }, `unknown format ""`},
		{"share no tenants", func(w io.Writer) error { return Share(w, "svg", "t", nil, sampleSummary()) }, "no tenants to plot"},
		{"share empty series", func(w io.Writer) error {
			return Share(w, "svg", "t", []Series{{Name: "team-a"}}, sampleSummary())
		}, `no samples for tenant "team-a"`},
		{"share missing summary", func(w io.Writer) error {
			return Share(w, "svg", "t", sampleShares(), map[string]ShareSummary{"team-a": {Mean: 1, Entitled: 1}})
		}, `no share summary for tenant "team-b"`},
		{"share negative", func(w io.Writer) error {
			return Share(w, "svg", "t", sampleShares(), map[string]ShareSummary{"team-a": {Mean: 1, Entitled: 1}, "team-b": {Entitled: -1}})
		}, `tenant "team-b" has share -1`},
		{"share duplicate tenant", func(w io.Writer) error {
			return Share(w, "svg", "t", append(sampleShares(), series("team-a", 1)), sampleSummary())
		}, `tenant "team-a" appears more than once`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := tt.draw(&buf)
			if err == nil {
				t.Fatalf("no error, want one containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes despite the error", buf.Len())
			}
		})
	}
}

func TestStartCDFScale(t *testing.T) {
	tests := []struct {
		name     string
		samples  []time.Duration
		wantLog  bool
		min, max float64
	}{
		{"narrow range is linear", []time.Duration{time.Minute, 50 * time.Minute}, false, 0, 50},
		{"two decades exactly is linear", []time.Duration{time.Minute, 100 * time.Minute}, false, 0, 100},
		{"wide range is log in whole decades", []time.Duration{30 * time.Second, 0, 250 * time.Minute}, true, 0.1, 1000},
		{"all immediate is linear", []time.Duration{0, 0}, false, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := cdfPlot("t", map[string][]time.Duration{"berth": tt.samples})
			if err != nil {
				t.Fatalf("cdfPlot: %v", err)
			}
			_, isLog := p.X.Scale.(gplot.LogScale)
			if isLog != tt.wantLog {
				t.Errorf("log scale %v, want %v", isLog, tt.wantLog)
			}
			if p.X.Min != tt.min || p.X.Max != tt.max {
				t.Errorf("x axis [%g, %g], want [%g, %g]", p.X.Min, p.X.Max, tt.min, tt.max)
			}
		})
	}
}

func TestECDF(t *testing.T) {
	got := ecdf([]time.Duration{2 * time.Minute, 0, time.Minute, time.Minute}, 0.5, 10)
	want := []struct{ x, y float64 }{{0.5, 0}, {0.5, 0.25}, {1, 0.5}, {1, 0.75}, {2, 1}, {10, 1}}
	if len(got) != len(want) {
		t.Fatalf("got %d points %v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		if got[i].X != w.x || got[i].Y != w.y {
			t.Errorf("point %d = (%g, %g), want (%g, %g)", i, got[i].X, got[i].Y, w.x, w.y)
		}
	}
}

func TestDecadeTicks(t *testing.T) {
	tests := []struct {
		name      string
		lo, hi    float64
		labels    []string
		wantTicks int
	}{
		{"below one", 0.1, 10, []string{"0.1", "1", "10"}, 19},
		{"above one", 1, 1000, []string{"1", "10", "100", "1000"}, 28},
		{"partial decades", 0.5, 20, []string{"1", "10"}, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ticks := decadeTicks(tt.lo, tt.hi)
			var labels []string
			for _, tk := range ticks {
				if tk.Value < tt.lo || tk.Value > tt.hi*(1+logSlack) {
					t.Errorf("tick %g outside [%g, %g]", tk.Value, tt.lo, tt.hi)
				}
				if tk.Label != "" {
					labels = append(labels, tk.Label)
				}
			}
			if strings.Join(labels, " ") != strings.Join(tt.labels, " ") {
				t.Errorf("labels %q, want %q", labels, tt.labels)
			}
			if len(ticks) != tt.wantTicks {
				t.Errorf("%d ticks, want %d", len(ticks), tt.wantTicks)
			}
		})
	}
}

func TestPercents(t *testing.T) {
	tests := []struct {
		name   string
		shares []float64
		want   []float64
	}{
		// Rounded one by one these are 33.3 × 3 = 99.9.
		{name: "thirds", shares: []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, want: []float64{33.4, 33.3, 33.3}},
		// One by one: 15.6 + 15.6 + 68.9 = 100.1.
		{name: "over 100", shares: []float64{0.1555, 0.1555, 0.689}, want: []float64{15.6, 15.5, 68.9}},
		{name: "not normalized", shares: []float64{2, 1, 1}, want: []float64{50, 25, 25}},
		{name: "exact", shares: []float64{0.25, 0.75}, want: []float64{25, 75}},
		{name: "all zero", shares: []float64{0, 0}, want: []float64{0, 0}},
		{name: "none", shares: nil, want: []float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Percents(tt.shares)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Percents(%v) = %v, want %v", tt.shares, got, tt.want)
			}
			var tenths int
			for _, p := range got {
				tenths += int(math.Round(p * 10))
			}
			if len(got) > 0 && tt.want[0] != 0 && tenths != 1000 {
				t.Errorf("Percents(%v) sums to %d tenths, want 1000", tt.shares, tenths)
			}
		})
	}
}
