package scenario_test

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/test/perf/scenario"
)

// replayCase is a scenario and when the replay must admit its workloads.
type replayCase struct {
	name     string
	yaml     string
	admitted map[string][]time.Duration // per workload name, per ClusterQueue
	makespan time.Duration
}

func TestReplayQuota(t *testing.T) {
	const s = time.Second
	runReplayCases(t, []replayCase{
		{
			name: "a queue admits what fits and the rest when quota is released",
			yaml: `
name: t
cohorts: [{name: c, count: 1, clusterQueues: 1, quota: [{resource: cpu, nominal: "2"}]}]
workloadClasses:
- {name: a, count: 3, interval: 0s, runtime: 1s, request: {cpu: "1"}}`,
			admitted: map[string][]time.Duration{"a-0": {0}, "a-1": {0}, "a-2": {s}},
			makespan: 2 * s,
		},
		{
			name: "higher priority goes first once quota frees, even if it arrived later",
			yaml: `
name: t
cohorts: [{name: c, count: 1, clusterQueues: 1, quota: [{resource: cpu, nominal: "2"}]}]
workloadClasses:
- {name: low, count: 2, interval: 0s, runtime: 1s, priority: 1, request: {cpu: "2"}}
- {name: high, count: 1, start: 500ms, interval: 0s, runtime: 1s, priority: 9, request: {cpu: "2"}}`,
			admitted: map[string][]time.Duration{"low-0": {0}, "high-0": {s}, "low-1": {2 * s}},
			makespan: 3 * s,
		},
		{
			name: "a gang above nominal borrows from the cohort's pool, which the other queue then waits for",
			yaml: `
name: t
cohorts: [{name: c, count: 1, clusterQueues: 2, quota: [{resource: cpu, nominal: "2", borrowingLimit: "2"}]}]
workloadClasses:
- {name: a, count: 1, interval: 0s, runtime: 1s, podsPerGang: 3, request: {cpu: "1"}}`,
			admitted: map[string][]time.Duration{"a-0": {0, s}},
			makespan: 2 * s,
		},
		{
			name: "a lending limit keeps the guaranteed part out of the pool",
			yaml: `
name: t
cohorts: [{name: c, count: 1, clusterQueues: 2, quota: [{resource: cpu, nominal: "2", lendingLimit: "1"}]}]
workloadClasses:
- {name: a, count: 1, interval: 0s, runtime: 1s, request: {cpu: "3"}}
- {name: b, count: 1, interval: 0s, runtime: 1s, request: {cpu: "1"}}`,
			// The pool is the two lendable cpus. q0's a takes its guaranteed
			// cpu and the whole pool, so q1's a and q0's b wait; q1's b runs
			// at once on q1's guaranteed cpu, which was never lendable.
			admitted: map[string][]time.Duration{"a-0": {0, s}, "b-0": {s, 0}},
			makespan: 2 * s,
		},
	})
}

func TestReplayQueueing(t *testing.T) {
	const s = time.Second
	runReplayCases(t, []replayCase{
		{
			name: "BestEffortFIFO lets smaller work pass a head that does not fit",
			yaml: `
name: t
cohorts: [{name: c, count: 1, clusterQueues: 1, quota: [{resource: cpu, nominal: "4"}]}]
workloadClasses:
- {name: big, count: 2, interval: 0s, runtime: 1s, priority: 9, request: {cpu: "3"}}
- {name: small, count: 1, interval: 0s, runtime: 1s, priority: 1, request: {cpu: "1"}}`,
			admitted: map[string][]time.Duration{"big-0": {0}, "big-1": {s}, "small-0": {0}},
			makespan: 2 * s,
		},
		{
			name: "StrictFIFO blocks behind its head",
			yaml: `
name: t
cohorts: [{name: c, count: 1, clusterQueues: 1, queueingStrategy: StrictFIFO, quota: [{resource: cpu, nominal: "4"}]}]
workloadClasses:
- {name: big, count: 2, interval: 0s, runtime: 1s, priority: 9, request: {cpu: "3"}}
- {name: small, count: 1, interval: 0s, runtime: 1s, priority: 1, request: {cpu: "1"}}`,
			admitted: map[string][]time.Duration{"big-0": {0}, "big-1": {s}, "small-0": {s}},
			makespan: 2 * s,
		},
	})
}

func runReplayCases(t *testing.T, tests []replayCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := scenario.Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			res := scenario.Replay(sc)
			got := map[string][]time.Duration{}
			for i, w := range sc.Workloads() {
				if got[w.Name] == nil {
					got[w.Name] = make([]time.Duration, len(sc.ClusterQueues()))
				}
				got[w.Name][w.ClusterQueue] = res.Admitted[i]
			}
			for name, want := range tc.admitted {
				for cq, at := range want {
					if got[name][cq] != at {
						t.Errorf("%s in queue %d admitted at %s, want %s", name, cq, got[name][cq], at)
					}
				}
			}
			if res.Makespan != tc.makespan {
				t.Errorf("makespan = %s, want %s", res.Makespan, tc.makespan)
			}
		})
	}
}

// TestReplayBaseline pins the quota floor of the baseline to the figures in
// docs/performance.md (and /work/shared/DESIGN.md's independent replay).
func TestReplayBaseline(t *testing.T) {
	sc, err := scenario.Named("baseline")
	if err != nil {
		t.Fatal(err)
	}
	res := scenario.Replay(sc)
	if res.Makespan != 66100*time.Millisecond {
		t.Errorf("makespan = %s, want 1m6.1s", res.Makespan)
	}
	want := map[string]time.Duration{"small": 44676 * time.Millisecond, "medium": 11364 * time.Millisecond, "large": 213 * time.Millisecond}
	for name, mean := range want {
		got := res.Waits[sc.ClassIndex(name)].Mean.Round(time.Millisecond)
		if got != mean {
			t.Errorf("mean wait of %s = %s, want %s", name, got, mean)
		}
	}
}
