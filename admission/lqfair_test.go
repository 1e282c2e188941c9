package admission

import (
	"strings"
	"testing"
)

// lqJob is a workload of one pod in LocalQueue lq of namespace ns, queued before
// round after of an lqCase.
type lqJob struct {
	name, ns, lq string
	weight       int64 // LocalQueue weight in milli-units; 0 = default
	prio         int32
	gpus         int64
	after        int
}

func (j lqJob) workload(created int64) Workload {
	w := job(j.name, "a", j.prio, created, 1, j.gpus)
	w.Key.Namespace = j.ns
	w.LocalQueue, w.LocalQueueWeight = j.lq, j.weight
	return w
}

// TestLocalQueueFairSharing runs rounds of: queue the jobs due, cycle, finish what
// was admitted; and checks the order of admission.
func TestLocalQueueFairSharing(t *testing.T) {
	// heavy queues four jobs in LocalQueue "heavy", then two in "light".
	heavyThenLight := []lqJob{
		{name: "a1", ns: "t", lq: "heavy", gpus: 1}, {name: "a2", ns: "t", lq: "heavy", gpus: 1},
		{name: "a3", ns: "t", lq: "heavy", gpus: 1}, {name: "a4", ns: "t", lq: "heavy", gpus: 1},
		{name: "b1", ns: "t", lq: "light", gpus: 1}, {name: "b2", ns: "t", lq: "light", gpus: 1},
	}
	tests := []struct {
		name    string
		off     bool
		nominal int64
		jobs    []lqJob
		want    string
	}{
		{
			name: "off: creation order", off: true, nominal: 1, jobs: heavyThenLight,
			want: "a1 a2 a3 a4 b1 b2",
		},
		{
			name: "equal weights interleave", nominal: 1, jobs: heavyThenLight,
			want: "a1 b1 a2 b2 a3 a4",
		},
		{
			name: "weight 2 gets two turns per turn of weight 1", nominal: 1,
			jobs: append(heavyThenLight[:4:4],
				lqJob{name: "b1", ns: "t", lq: "light", weight: 2000, gpus: 1},
				lqJob{name: "b2", ns: "t", lq: "light", weight: 2000, gpus: 1},
				lqJob{name: "b3", ns: "t", lq: "light", weight: 2000, gpus: 1}),
			want: "a1 b1 b2 a2 b3 a3 a4",
		},
		{
			name: "priority comes before the LocalQueue's turn", nominal: 1,
			jobs: append(heavyThenLight[:6:6], lqJob{name: "urgent", ns: "t", lq: "heavy", prio: 5, gpus: 1}),
			want: "urgent a1 b1 a2 b2 a3 a4",
		},
		{
			name: "cost is the share of the queue's quota", nominal: 2,
			jobs: []lqJob{
				{name: "a1", ns: "t", lq: "heavy", gpus: 2}, {name: "a2", ns: "t", lq: "heavy", gpus: 2},
				{name: "a3", ns: "t", lq: "heavy", gpus: 2},
				{name: "b1", ns: "t", lq: "light", gpus: 1}, {name: "b2", ns: "t", lq: "light", gpus: 1},
				{name: "b3", ns: "t", lq: "light", gpus: 1}, {name: "b4", ns: "t", lq: "light", gpus: 1},
			},
			want: "a1 | b1 b2 | a2 | b3 b4 | a3",
		},
		{
			name: "a LocalQueue that was idle earns no credit", nominal: 1,
			jobs: append(heavyThenLight[:4:4],
				lqJob{name: "b1", ns: "t", lq: "light", gpus: 1, after: 2},
				lqJob{name: "b2", ns: "t", lq: "light", gpus: 1, after: 2},
				lqJob{name: "b3", ns: "t", lq: "light", gpus: 1, after: 2}),
			want: "a1 a2 b1 a3 b2 a4 b3",
		},
		{
			name: "LocalQueues of the same name in two namespaces are two LocalQueues", nominal: 1,
			jobs: []lqJob{
				{name: "x1", ns: "x", lq: "default", gpus: 1}, {name: "x2", ns: "x", lq: "default", gpus: 1},
				{name: "y1", ns: "y", lq: "default", gpus: 1}, {name: "y2", ns: "y", lq: "default", gpus: 1},
			},
			want: "x1 y1 x2 y2",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, Options{FairSharing: true, LocalQueueFairSharing: !tc.off})
			mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{tc.nominal}))
			var rounds []string
			for round := 0; round < 20; round++ {
				for i, j := range tc.jobs {
					if j.after == round {
						mustWL(t, e, j.workload(int64(i+1)))
					}
				}
				res := cycle(t, e)
				for _, a := range res.Admitted {
					e.DeleteWorkload(a.Key)
				}
				if len(res.Admitted) > 0 {
					rounds = append(rounds, strings.Join(admittedNames(res), " "))
				}
			}
			got := strings.Join(rounds, " | ")
			if !strings.Contains(tc.want, "|") {
				got = strings.ReplaceAll(got, " | ", " ")
			}
			if got != tc.want {
				t.Fatalf("admitted %q, want %q", got, tc.want)
			}
		})
	}
}

// TestLocalQueueFairSharingKeepsPlace: a workload evicted, or whose admission is
// rolled back, returns to its place rather than behind its LocalQueue's later work,
// and a rollback restores the queue's virtual time.
func TestLocalQueueFairSharingKeepsPlace(t *testing.T) {
	e := newEngine(t, Options{LocalQueueFairSharing: true})
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{1}, preempt(PreemptionPolicy{WithinClusterQueue: PreemptLowerPriority})))
	jobs := []lqJob{
		{name: "a1", ns: "t", lq: "heavy", gpus: 1}, {name: "a2", ns: "t", lq: "heavy", gpus: 1},
		{name: "b1", ns: "t", lq: "light", gpus: 1}, {name: "b2", ns: "t", lq: "light", gpus: 1},
	}
	specs := map[string]Workload{}
	for i, j := range jobs {
		w := j.workload(int64(i + 1))
		specs[j.name] = w
		mustWL(t, e, w)
	}
	res := cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{"a1"}) {
		t.Fatalf("admitted %v, want [a1]", got)
	}
	confirm(t, e, specs, res)
	e.DeleteWorkload(key2("t", "a1"))

	res = cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{"b1"}) {
		t.Fatalf("admitted %v, want [b1]", got)
	}
	c := e.queues.cqs["a"]
	before := c.vtime
	e.Rollback(key2("t", "b1"))
	if c.vtime != 0 {
		t.Fatalf("virtual time %d after rollback, want 0 (was %d)", c.vtime, before)
	}
	res = cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{"b1"}) {
		t.Fatalf("after rollback admitted %v, want b1 again", got)
	}
	confirm(t, e, specs, res)

	// A higher-priority job preempts b1; b1 then returns ahead of a2 and b2.
	urgent := lqJob{name: "urgent", ns: "t", lq: "heavy", prio: 9, gpus: 1}.workload(9)
	specs["urgent"] = urgent
	mustWL(t, e, urgent)
	res = cycle(t, e)
	if got := victimNames(res); !eqStrings(got, []string{"b1"}) {
		t.Fatalf("victims %v, want [b1]", got)
	}
	evict(t, e, specs, res)
	res = cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{"urgent"}) {
		t.Fatalf("admitted %v, want [urgent]", got)
	}
	e.DeleteWorkload(key2("t", "urgent"))
	if got := admittedNames(cycle(t, e)); !eqStrings(got, []string{"b1"}) {
		t.Fatalf("admitted %v, want the evicted b1 back in its place", got)
	}
}

// TestLocalQueueFairSharingChargesGrowth: a pending workload that asks for
// more than its start tag was charged for is tagged again, behind its
// LocalQueue's share, so that a LocalQueue cannot queue small and grow while
// it waits; one that shrinks keeps its place.
func TestLocalQueueFairSharingChargesGrowth(t *testing.T) {
	for _, tc := range []struct {
		name      string
		grownGPUs int64
		want      string
	}{
		{name: "grown from 1 to 8 GPUs: behind the other LocalQueue's job", grownGPUs: 8, want: "b1"},
		{name: "unchanged size: keeps its place", grownGPUs: 1, want: "a1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, Options{LocalQueueFairSharing: true})
			mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}))
			mustWL(t, e, lqJob{name: "a1", ns: "t", lq: "heavy", gpus: 1}.workload(1))
			mustWL(t, e, lqJob{name: "b1", ns: "t", lq: "light", gpus: 8}.workload(2))
			grown := lqJob{name: "a1", ns: "t", lq: "heavy", gpus: tc.grownGPUs}.workload(1)
			grown.Generation = 2
			mustWL(t, e, grown)
			if got := admittedNames(cycle(t, e)); len(got) == 0 || got[0] != tc.want {
				t.Fatalf("admitted %v first, want %s", got, tc.want)
			}
		})
	}
}

// TestLocalQueueWeightValidated: a negative weight is invalid input.
func TestLocalQueueWeightValidated(t *testing.T) {
	e := newEngine(t, Options{LocalQueueFairSharing: true})
	w := lqJob{name: "bad", ns: "t", lq: "q", weight: -1, gpus: 1}.workload(1)
	err := e.UpsertWorkload(w)
	if err == nil || !strings.Contains(err.Error(), "localQueueWeight") {
		t.Fatalf("error %v, want one naming localQueueWeight", err)
	}
	if len(e.workloads) != 0 {
		t.Fatalf("invalid workload was stored")
	}
}

// TestScaledRatio: shares round up and are capped without overflow.
func TestScaledRatio(t *testing.T) {
	tests := []struct {
		amt, nominal, want int64
	}{
		{amt: 1000, nominal: 1000, want: shareUnit},
		{amt: 1, nominal: 3, want: 333_334},
		{amt: MaxAmount, nominal: 1, want: maxShare},
		{amt: MaxAmount, nominal: MaxAmount, want: shareUnit},
		{amt: 0, nominal: 5, want: 0},
	}
	for _, tc := range tests {
		if got := scaledRatio(tc.amt, tc.nominal); got != tc.want {
			t.Errorf("scaledRatio(%d, %d) = %d, want %d", tc.amt, tc.nominal, got, tc.want)
		}
	}
}

func key2(ns, name string) WorkloadKey { return WorkloadKey{Namespace: ns, Name: name} }
