package headroom

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at is t0 plus minutes.
func at(minutes float64) time.Time { return t0.Add(time.Duration(minutes * float64(time.Minute))) }

// step is a count from a minute on.
type step struct {
	min      float64
	replicas int32
}

func historyOf(window, latency time.Duration, steps ...step) *History {
	h := NewHistory(window, latency)
	for _, s := range steps {
		h.Observe(at(s.min), s.replicas)
	}
	return h
}

func TestDemand(t *testing.T) {
	rule := DemandRule{Window: 24 * time.Hour, Latency: 10 * time.Minute, Percentile: 100}
	cases := []struct {
		name  string
		steps []step
		rule  DemandRule
		now   float64
		want  int32
	}{
		{name: "no history", now: 60, rule: rule, want: 0},
		{name: "flat", steps: []step{{0, 3}, {30, 3}}, now: 60, rule: rule, want: 0},
		{name: "the first observation is no rise", steps: []step{{0, 8}}, now: 60, rule: rule, want: 0},
		{name: "one step of four", steps: []step{{0, 1}, {20, 5}}, now: 60, rule: rule, want: 4},
		{name: "a ramp counts what one latency adds", rule: rule, now: 60,
			steps: []step{{0, 1}, {2, 2}, {4, 3}, {6, 4}, {8, 5}, {10, 6}, {12, 7}, {14, 8}}, want: 5},
		{name: "a slow ramp needs one at a time", rule: rule, now: 120,
			steps: []step{{0, 1}, {15, 2}, {30, 3}, {45, 4}}, want: 1},
		{name: "a dip within the latency counts from its low", rule: rule, now: 60,
			steps: []step{{0, 5}, {3, 2}, {6, 6}}, want: 4},
		{name: "scale-ups older than the window are forgotten", rule: DemandRule{Window: time.Hour, Latency: 10 * time.Minute, Percentile: 100},
			steps: []step{{0, 1}, {10, 9}, {100, 10}}, now: 130, want: 1},
		{name: "percentile takes the nearest rank", rule: DemandRule{Window: 24 * time.Hour, Latency: 5 * time.Minute, Percentile: 50},
			steps: []step{{0, 0}, {10, 1}, {20, 0}, {30, 2}, {40, 0}, {50, 8}}, now: 60, want: 2},
		{name: "with a daily period, yesterday's burst counts ahead of its hour, by the lead",
			rule:  DemandRule{Window: 26 * time.Hour, Latency: 10 * time.Minute, Percentile: 100, Period: 24 * time.Hour, Lead: 45 * time.Minute},
			steps: []step{{0, 1}, {600, 6}, {700, 1}}, now: 24*60 + 600 - 30, want: 5},
		{name: "with a daily period, yesterday's burst does not count at other hours",
			rule:  DemandRule{Window: 26 * time.Hour, Latency: 10 * time.Minute, Percentile: 100, Period: 24 * time.Hour, Lead: 45 * time.Minute},
			steps: []step{{0, 1}, {600, 6}, {700, 1}}, now: 24*60 + 600 - 120, want: 0},
		{name: "with a daily period, the burst under way counts",
			rule:  DemandRule{Window: 26 * time.Hour, Latency: 10 * time.Minute, Percentile: 100, Period: 24 * time.Hour, Lead: 45 * time.Minute},
			steps: []step{{0, 1}, {1000, 3}}, now: 1005, want: 2},
		{name: "p95 of many small rises and one large", rule: DemandRule{Window: 24 * time.Hour, Latency: 5 * time.Minute, Percentile: 95},
			steps: append(sawtooth(30), step{1000, 20}), now: 1001, want: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := historyOf(tc.rule.Window, tc.rule.Latency, tc.steps...)
			if got := h.Demand(at(tc.now), tc.rule); got != tc.want {
				t.Errorf("Demand = %d, want %d (history %v)", got, tc.want, h.obs)
			}
		})
	}
}

// sawtooth is n rises of one replica, each followed by a fall, 20 minutes
// apart.
func sawtooth(n int) []step {
	var s []step
	for i := range n {
		s = append(s, step{float64(20 * i), 1}, step{float64(20*i + 10), 0})
	}
	return s
}

func TestSize(t *testing.T) {
	demand := DemandRule{Window: 24 * time.Hour, Latency: 10 * time.Minute, Percentile: 100}
	burst := historyOf(demand.Window, demand.Latency, step{0, 1}, step{5, 6})
	cases := []struct {
		name                string
		policy              Policy
		current, admissible int32
		want                int32
	}{
		{name: "fixed", policy: Policy{Mode: Fixed, Replicas: 3}, current: 7, admissible: -1, want: 3},
		{name: "percent rounds up", policy: Policy{Mode: Percent, Percent: 25}, current: 7, admissible: -1, want: 2},
		{name: "percent of zero replicas is zero", policy: Policy{Mode: Percent, Percent: 50}, current: 0, admissible: -1, want: 0},
		{name: "min lifts", policy: Policy{Mode: Percent, Percent: 10, Min: 2}, current: 3, admissible: -1, want: 2},
		{name: "max caps", policy: Policy{Mode: Fixed, Replicas: 9, Max: 4}, current: 0, admissible: -1, want: 4},
		{name: "demand", policy: Policy{Mode: Demand, Demand: demand}, current: 6, admissible: -1, want: 5},
		{name: "demand within bounds", policy: Policy{Mode: Demand, Demand: demand, Min: 1, Max: 3}, current: 6, admissible: -1, want: 3},
		{name: "quota caps below min", policy: Policy{Mode: Fixed, Replicas: 4, Min: 3}, current: 8, admissible: 2, want: 2},
		{name: "no quota left keeps none", policy: Policy{Mode: Demand, Demand: demand, Min: 2}, current: 10, admissible: 0, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.policy.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if got := tc.policy.Size(burst, at(30), tc.current, tc.admissible); got != tc.want {
				t.Errorf("Size = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		policy Policy
		want   string
	}{
		{name: "no mode", policy: Policy{}, want: `mode must be one of Fixed, Percent, Demand; got ""`},
		{name: "negative replicas", policy: Policy{Mode: Fixed, Replicas: -1}, want: "replicas must not be negative"},
		{name: "percent too large", policy: Policy{Mode: Percent, Percent: 1001}, want: "percent must be within 0-1000"},
		{name: "latency beyond window", policy: Policy{Mode: Demand, Demand: DemandRule{Window: time.Minute, Latency: time.Hour, Percentile: 95}},
			want: "the latency no longer than the window"},
		{name: "percentile zero", policy: Policy{Mode: Demand, Demand: DemandRule{Window: time.Hour, Latency: time.Minute}},
			want: "percentile must be within 1-100, got 0"},
		{name: "min above max", policy: Policy{Mode: Fixed, Replicas: 1, Min: 3, Max: 2}, want: "min must not exceed max"},
		{name: "a period beyond the window", policy: Policy{Mode: Demand, Demand: DemandRule{Window: 24 * time.Hour, Latency: time.Minute, Percentile: 95,
			Period: 24 * time.Hour, Lead: time.Hour}}, want: "a period plus its lead must fit in the window"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestHistoryKeepsOnlyWhatTheWindowReads(t *testing.T) {
	h := NewHistory(time.Hour, 10*time.Minute)
	for i := range 1000 {
		h.Observe(at(float64(i)), int32(i%7))
	}
	// 70 minutes of one observation a minute, and the level before them.
	if n := len(h.obs); n > 72 {
		t.Errorf("history holds %d observations after 1000 minutes, want at most 72", n)
	}
	h.Observe(at(999), 3) // the same instant: replaces
	if last := h.obs[len(h.obs)-1]; last.Replicas != 3 || !last.At.Equal(at(999)) {
		t.Errorf("last observation = %+v, want 3 at minute 999", last)
	}
}
