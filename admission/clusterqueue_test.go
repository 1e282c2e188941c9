package admission

import (
	"strings"
	"testing"
)

func TestNewValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "zero value", opts: Options{}},
		{name: "defaults", opts: DefaultOptions()},
		{name: "negative skips", opts: Options{StarvationSkips: -1}, wantErr: "StarvationSkips"},
		{name: "negative age", opts: Options{StarvationAge: -1}, wantErr: "StarvationAge"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(tc.opts)
			if tc.wantErr == "" {
				if err != nil || e.Options().StarvationSkips != DefaultStarvationSkips && tc.opts.StarvationSkips == 0 {
					t.Fatalf("New: %v, options %+v", err, e.Options())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New error %v, want mention of %s", err, tc.wantErr)
			}
		})
	}
}

func TestUpsertClusterQueueValidation(t *testing.T) {
	valid := func() ClusterQueue { return newCQ("a", "co", []string{"h200"}, []int64{8}) }
	tests := []struct {
		name    string
		mutate  func(*ClusterQueue)
		wantErr string
	}{
		{name: "valid", mutate: func(*ClusterQueue) {}},
		{name: "empty name", mutate: func(c *ClusterQueue) { c.Name = "" }, wantErr: "name"},
		{name: "borrowing limit without cohort", mutate: func(c *ClusterQueue) { c.Cohort = ""; borrowLimit(2)(c) }, wantErr: "no cohort"},
		{name: "lending limit without cohort", mutate: func(c *ClusterQueue) { c.Cohort = ""; lendLimit(2)(c) }, wantErr: "no cohort"},
		{name: "negative nominal", mutate: func(c *ClusterQueue) {
			c.ResourceGroups[0].Flavors[0].Resources[gpu] = Quota{Nominal: -1}
		}, wantErr: "nominalQuota"},
		{name: "nominal above MaxAmount", mutate: func(c *ClusterQueue) {
			c.ResourceGroups[0].Flavors[0].Resources[gpu] = Quota{Nominal: MaxAmount + 1}
		}, wantErr: "nominalQuota"},
		{name: "duplicate flavor", mutate: func(c *ClusterQueue) {
			c.ResourceGroups[0].Flavors = append(c.ResourceGroups[0].Flavors, c.ResourceGroups[0].Flavors[0])
		}, wantErr: "more than once"},
		{name: "resource in two groups", mutate: func(c *ClusterQueue) {
			c.ResourceGroups = append(c.ResourceGroups, ResourceGroup{CoveredResources: []ResourceName{gpu},
				Flavors: []FlavorQuotas{{Flavor: "x", Resources: map[ResourceName]Quota{gpu: {}}}}})
		}, wantErr: "covered more than once"},
		{name: "missing covered resource quota", mutate: func(c *ClusterQueue) {
			c.ResourceGroups[0].CoveredResources = []ResourceName{gpu, cpu}
		}, wantErr: "exactly the covered resources"},
		{name: "no flavors", mutate: func(c *ClusterQueue) { c.ResourceGroups[0].Flavors = nil }, wantErr: "flavors"},
		{name: "unknown strategy", mutate: func(c *ClusterQueue) { c.QueueingStrategy = "LIFO" }, wantErr: "queueingStrategy"},
		{name: "Any within queue", mutate: func(c *ClusterQueue) { c.Preemption.WithinClusterQueue = PreemptAny }, wantErr: "withinClusterQueue"},
		{name: "newer-equal for reclaim", mutate: func(c *ClusterQueue) {
			c.Preemption.ReclaimWithinCohort = PreemptLowerOrNewerEqualPriority
		}, wantErr: "reclaimWithinCohort"},
		{name: "negative weight", mutate: func(c *ClusterQueue) { c.FairShareWeight = -1 }, wantErr: "fairShareWeight"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, DefaultOptions())
			mustCQ(t, e, newCQ("a", "co", []string{"h200"}, []int64{2}))
			cq := valid()
			tc.mutate(&cq)
			err := e.UpsertClusterQueue(cq)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want mention of %q", err, tc.wantErr)
			}
			// State unchanged: the old 2-GPU quota still applies.
			mustWL(t, e, job("w", "a", 0, 1, 1, 2), job("x", "a", 0, 2, 1, 1))
			if got := admittedNames(cycle(t, e)); !eqStrings(got, []string{"w"}) {
				t.Fatalf("after rejected update admitted %v, want [w]", got)
			}
		})
	}
}

// TestQuotaAndCohorts checks nominal quota, borrowing, borrowing and lending limits.
func TestQuotaAndCohorts(t *testing.T) {
	tests := []struct {
		name string
		cqs  []ClusterQueue
		jobs []Workload // all in queue "a"
		want []string
	}{
		{
			name: "no cohort: nominal only",
			cqs:  []ClusterQueue{newCQ("a", "", []string{"h200"}, []int64{8})},
			jobs: []Workload{job("j1", "a", 0, 1, 1, 4), job("j2", "a", 0, 2, 1, 4), job("j3", "a", 0, 3, 1, 4)},
			want: []string{"j1", "j2"},
		},
		{
			name: "borrow idle quota of the cohort",
			cqs:  []ClusterQueue{newCQ("a", "co", []string{"h200"}, []int64{4}), newCQ("b", "co", []string{"h200"}, []int64{4})},
			jobs: []Workload{job("j1", "a", 0, 1, 1, 4), job("j2", "a", 0, 2, 1, 4), job("j3", "a", 0, 3, 1, 1)},
			want: []string{"j1", "j2"},
		},
		{
			name: "borrowing limit",
			cqs: []ClusterQueue{newCQ("a", "co", []string{"h200"}, []int64{4}, borrowLimit(2)),
				newCQ("b", "co", []string{"h200"}, []int64{8})},
			jobs: []Workload{job("j1", "a", 0, 1, 1, 4), job("j2", "a", 0, 2, 1, 4), job("j3", "a", 0, 3, 1, 2)},
			want: []string{"j1", "j3"},
		},
		{
			name: "lending limit",
			cqs: []ClusterQueue{newCQ("a", "co", []string{"h200"}, []int64{4}),
				newCQ("b", "co", []string{"h200"}, []int64{8}, lendLimit(3))},
			jobs: []Workload{job("j1", "a", 0, 1, 1, 4), job("j2", "a", 0, 2, 1, 4), job("j3", "a", 0, 3, 1, 3)},
			want: []string{"j1", "j3"},
		},
		{
			name: "lending limit 0 keeps quota private",
			cqs: []ClusterQueue{newCQ("a", "co", []string{"h200"}, []int64{4}),
				newCQ("b", "co", []string{"h200"}, []int64{8}, lendLimit(0))},
			jobs: []Workload{job("j1", "a", 0, 1, 1, 4), job("j2", "a", 0, 2, 1, 1)},
			want: []string{"j1"},
		},
		{
			name: "gang needs all pods at once",
			cqs:  []ClusterQueue{newCQ("a", "", []string{"h200"}, []int64{8})},
			jobs: []Workload{job("j1", "a", 0, 1, 3, 2), job("j2", "a", 0, 2, 2, 2), job("j3", "a", 0, 3, 1, 2)},
			want: []string{"j1", "j3"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, DefaultOptions())
			mustCQ(t, e, tc.cqs...)
			mustWL(t, e, tc.jobs...)
			res := cycle(t, e)
			if got := admittedNames(res); !eqStrings(got, tc.want) {
				t.Fatalf("admitted %v, want %v (%s)", got, tc.want, fmtResult(res))
			}
			if v := limitViolationsFR(e); len(v) > 0 {
				t.Fatalf("limits exceeded: %v", v)
			}
		})
	}
}

// TestFlavorChoice checks the rule: first flavor where the workload fits without
// borrowing, else first where it fits by borrowing.
func TestFlavorChoice(t *testing.T) {
	tests := []struct {
		name    string
		nominal []int64 // a's quota per flavor h100, h200
		other   []int64 // b's (same cohort) quota per flavor
		gpus    int64
		want    string
	}{
		{name: "first flavor fits", nominal: []int64{8, 8}, other: []int64{0, 0}, gpus: 4, want: "h100"},
		{name: "second fits without borrowing", nominal: []int64{4, 8}, other: []int64{8, 8}, gpus: 6, want: "h200"},
		{name: "borrowing in first beats nothing", nominal: []int64{4, 2}, other: []int64{8, 0}, gpus: 6, want: "h100"},
		{name: "borrowing in second when first cannot", nominal: []int64{4, 2}, other: []int64{0, 8}, gpus: 6, want: "h200"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, DefaultOptions())
			mustCQ(t, e, newCQ("a", "co", []string{"h100", "h200"}, tc.nominal), newCQ("b", "co", []string{"h100", "h200"}, tc.other))
			mustWL(t, e, job("j", "a", 0, 1, 1, tc.gpus))
			res := cycle(t, e)
			if len(res.Admitted) != 1 {
				t.Fatalf("not admitted: %s", fmtResult(res))
			}
			if got := res.Admitted[0].Admission.PodSets[0].Flavors[gpu]; got != tc.want {
				t.Fatalf("flavor %s, want %s", got, tc.want)
			}
		})
	}
}

// TestMultiGroupGang admits a two-pod-set gang over two resource groups whole.
func TestMultiGroupGang(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	cq := newCQ("a", "", []string{"h200"}, []int64{16})
	cq.ResourceGroups = append(cq.ResourceGroups, ResourceGroup{CoveredResources: []ResourceName{cpu},
		Flavors: []FlavorQuotas{{Flavor: "amd", Resources: map[ResourceName]Quota{cpu: {Nominal: 4000}}}, {Flavor: "intel", Resources: map[ResourceName]Quota{cpu: {Nominal: 64000}}}}})
	mustCQ(t, e, cq)
	w := Workload{Key: key("train"), ClusterQueue: "a", PodSets: []PodSet{
		{Name: "launcher", Count: 1, Requests: Resources{cpu: 2000}},
		{Name: "workers", Count: 4, Requests: Resources{gpu: 4000, cpu: 8000}},
	}}
	mustWL(t, e, w)
	res := cycle(t, e)
	if len(res.Admitted) != 1 {
		t.Fatalf("not admitted: %s", fmtResult(res))
	}
	a := res.Admitted[0].Admission
	if a.PodSets[0].Name != "launcher" || a.PodSets[0].Flavors[cpu] != "intel" || a.PodSets[1].Count != 4 ||
		a.PodSets[1].Flavors[gpu] != "h200" || a.PodSets[1].Flavors[cpu] != "intel" {
		t.Fatalf("admission %+v", a)
	}
	// A second identical gang fits the CPU but not the GPU group: nothing of it is admitted.
	w2 := w
	w2.Key = key("train2")
	mustWL(t, e, w2)
	res = cycle(t, e)
	if len(res.Admitted) != 0 || e.queues.cqs["a"].usage[makeFR(e.names.flavorIDs["intel"], e.names.resIDs[cpu])] != 34000 {
		t.Fatalf("partial admission: %s, usage %v", fmtResult(res), e.queues.cqs["a"].usage)
	}
}

// TestClusterQueueLifecycle: missing queue holds, creation admits, stop holds,
// deletion keeps usage of admitted workloads.
func TestClusterQueueLifecycle(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustWL(t, e, job("j1", "a", 0, 1, 1, 4))
	res := cycle(t, e)
	if p, ok := pendingReason(res, "j1"); !ok || p.Reason != ClusterQueueNotFound || !strings.Contains(p.Message, "create it") {
		t.Fatalf("want ClusterQueueNotFound saying what to do, got %s", fmtResult(res))
	}
	stopped := newCQ("a", "", []string{"h200"}, []int64{8})
	stopped.Stopped = true
	mustCQ(t, e, stopped)
	res = cycle(t, e)
	if p, ok := pendingReason(res, "j1"); !ok || p.Reason != ClusterQueueStopped {
		t.Fatalf("want ClusterQueueStopped, got %s", fmtResult(res))
	}
	// A queue whose flavor is missing is held too, and says which flavor
	// to create: a waiting workload's message is what its owner reads.
	missing := newCQ("a", "", []string{"h200"}, []int64{8})
	missing.MissingFlavors = []string{"h200"}
	mustCQ(t, e, missing)
	res = cycle(t, e)
	if p, ok := pendingReason(res, "j1"); !ok || p.Reason != FlavorNotFound ||
		!strings.Contains(p.Message, "ResourceFlavors h200") || !strings.Contains(p.Message, "create them") {
		t.Fatalf("want FlavorNotFound naming h200, got %s", fmtResult(res))
	}
	if ex, ok := e.Explain(key("j1")); !ok || ex.Reason != FlavorNotFound {
		t.Fatalf("explained %+v", ex)
	}
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}))
	if got := admittedNames(cycle(t, e)); !eqStrings(got, []string{"j1"}) {
		t.Fatalf("admitted %v", got)
	}
	e.DeleteClusterQueue("a")
	mustWL(t, e, job("j2", "a", 0, 2, 1, 4))
	res = cycle(t, e)
	if p, ok := pendingReason(res, "j2"); !ok || p.Reason != ClusterQueueNotFound {
		t.Fatalf("want ClusterQueueNotFound, got %s", fmtResult(res))
	}
	// Back with 6 GPUs: j1's 4 still count, j2 (4) does not fit.
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{6}))
	res = cycle(t, e)
	if p, ok := pendingReason(res, "j2"); !ok || p.Reason != InsufficientQuota {
		t.Fatalf("want InsufficientQuota, got %s", fmtResult(res))
	}
}
