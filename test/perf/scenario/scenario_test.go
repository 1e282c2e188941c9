package scenario_test

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/test/perf/scenario"
)

// one is a valid one-cohort scenario; tests append to or replace its parts.
const one = `
name: t
cohorts:
- name: c
  count: 1
  clusterQueues: 2
  quota:
  - {resource: cpu, nominal: "4", borrowingLimit: "4"}
workloadClasses:
- {name: small, count: 3, interval: 100ms, runtime: 1s, request: {cpu: "1"}}
`

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown field", one + "colour: blue\n", "unknown field"},
		{"no classes", strings.Split(one, "workloadClasses")[0], "at least one class"},
		{"uncovered resource", one + "- {name: gpu, count: 1, interval: 1s, runtime: 1s, request: {nvidia.com/gpu: \"1\"}}\n",
			"has no quota for"},
		{"gang too big", one + "- {name: huge, count: 1, interval: 1s, runtime: 1s, podsPerGang: 3, request: {cpu: \"3\"}}\n",
			"more than a ClusterQueue"},
		{"duplicate class", one + "- {name: small, count: 1, interval: 1s, runtime: 1s, request: {cpu: \"1\"}}\n", "duplicate name"},
		{"zero runtime", one + "- {name: z, count: 1, interval: 1s, runtime: 0s, request: {cpu: \"1\"}}\n", "runtime must be positive"},
		{"bad strategy", strings.Replace(one, "clusterQueues: 2", "clusterQueues: 2\n  queueingStrategy: LIFO", 1), "queueingStrategy"},
		{"bad topology", one + "- {name: tp, count: 1, interval: 1s, runtime: 1s, request: {cpu: \"1\"}, topology: {level: rack, mode: Sometimes}}\n",
			"topology"},
		{"lending above nominal", strings.Replace(one, `borrowingLimit: "4"`, `lendingLimit: "5"`, 1), "lendingLimit exceeds nominal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scenario.Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestShippedScenarios(t *testing.T) {
	tests := []struct {
		name          string
		workloads     int
		clusterQueues int
	}{
		{"smoke", 58, 2},
		{"baseline", 15000, 30},
		{"large", 50000, 1000},
		{"gpu-gangs", 448, 8},
	}
	if got := len(scenario.Shipped()); got != len(tests) {
		t.Errorf("Shipped() lists %d scenarios, the test knows %d", got, len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := scenario.Named(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(s.Workloads()); got != tc.workloads || s.WorkloadCount() != tc.workloads {
				t.Errorf("workloads = %d (count %d), want %d", got, s.WorkloadCount(), tc.workloads)
			}
			if got := len(s.ClusterQueues()); got != tc.clusterQueues {
				t.Errorf("ClusterQueues = %d, want %d", got, tc.clusterQueues)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	s, err := scenario.Parse([]byte(strings.Replace(one, "count: 3", "count: 11", 1)))
	if err != nil {
		t.Fatal(err)
	}
	cqs := s.ClusterQueues()
	if cqs[0].Name != "c-0-q0" || cqs[1].Name != "c-0-q1" || cqs[1].Cohort != "c-0" {
		t.Errorf("ClusterQueues = %+v, want c-0-q0 and c-0-q1 in cohort c-0", cqs)
	}
	wls := s.Workloads()
	tests := []struct {
		i       int
		name    string
		cq      int
		arrival time.Duration
	}{
		{0, "small-00", 0, 0},
		{1, "small-00", 1, 0},
		{2, "small-01", 0, 100 * time.Millisecond},
		{21, "small-10", 1, time.Second},
	}
	for _, tc := range tests {
		w := wls[tc.i]
		if w.Name != tc.name || w.ClusterQueue != tc.cq || w.Arrival != tc.arrival {
			t.Errorf("Workloads()[%d] = %+v, want %s in queue %d at %s", tc.i, w, tc.name, tc.cq, tc.arrival)
		}
	}
}

func TestSummarize(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name   string
		values []time.Duration
		want   scenario.Summary
	}{
		{"empty", nil, scenario.Summary{}},
		{"one", ms(7), scenario.Summary{Count: 1, Mean: 7 * time.Millisecond, P50: 7 * time.Millisecond,
			P90: 7 * time.Millisecond, P95: 7 * time.Millisecond, P99: 7 * time.Millisecond, Max: 7 * time.Millisecond}},
		{"unsorted ten", ms(10, 1, 9, 2, 8, 3, 7, 4, 6, 5), scenario.Summary{Count: 10, Mean: 5500 * time.Microsecond,
			P50: 5 * time.Millisecond, P90: 9 * time.Millisecond, P95: 10 * time.Millisecond, P99: 10 * time.Millisecond, Max: 10 * time.Millisecond}},
		{"twenty", ms(20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1), scenario.Summary{Count: 20, Mean: 10500 * time.Microsecond,
			P50: 10 * time.Millisecond, P90: 18 * time.Millisecond, P95: 19 * time.Millisecond, P99: 20 * time.Millisecond, Max: 20 * time.Millisecond}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := scenario.Summarize(tc.values); got != tc.want {
				t.Errorf("Summarize = %+v, want %+v", got, tc.want)
			}
		})
	}
}
