package admission

import (
	"strings"
	"testing"
)

// productFlavors labels flavor a100 and h100 with their GPU product; plain
// has no labels.
func productFlavors(t *testing.T, e *Engine) {
	t.Helper()
	for name, p := range map[string]string{"a100": "A100", "h100": "H100"} {
		if err := e.UpsertFlavor(Flavor{Name: name, NodeLabels: map[string]string{productKey: p, "zone": "z1"}}); err != nil {
			t.Fatal(err)
		}
	}
}

// twoGroups adds a cpu group of one unlabelled flavor to the queue.
func twoGroups(cq *ClusterQueue) {
	cq.ResourceGroups = append(cq.ResourceGroups, ResourceGroup{CoveredResources: []ResourceName{"cpu"},
		Flavors: []FlavorQuotas{{Flavor: "plain", Resources: map[ResourceName]Quota{"cpu": {Nominal: 64_000}}}}})
}

func TestFlavorChoiceHonoursThePodsNodes(t *testing.T) {
	h100 := labelFilter{key: productKey, want: "H100"}
	tests := []struct {
		name        string
		w           Workload
		wantFlavor  string
		wantReason  PendingReason
		wantMessage string
	}{
		{name: "no constraint: the first flavor", w: job("w", "q", 0, 1, 1, 4), wantFlavor: "a100"},
		{name: "pinned to H100: passes over the A100 flavor with room", w: constrained(job("w", "q", 0, 1, 1, 4), h100), wantFlavor: "h100"},
		{name: "a key the flavors do not label rules nothing out",
			w: constrained(job("w", "q", 0, 1, 1, 4), labelFilter{key: "pool", want: "team-a"}), wantFlavor: "a100"},
		{name: "the pinned flavor is full: waits rather than taking the other",
			w: constrained(job("w", "q", 0, 1, 2, 4), h100), wantReason: ExceedsMaxQuota, wantMessage: "in flavor h100"},
		{name: "no flavor matches: held with what to change",
			w: constrained(job("w", "q", 0, 1, 1, 4), labelFilter{key: productKey, want: "B200"}), wantReason: NoMatchingFlavor,
			wantMessage: `no flavor of ClusterQueue "q" for nvidia.com/gpu has nodes the pods may run on: pod set main (nodeSelector ` +
				productKey + `=B200); flavors a100 (` + productKey + `=A100,zone=z1), h100 (` + productKey + `=H100,zone=z1)`},
		{name: "a pod set that requests nothing of the group does not count",
			w: func() Workload {
				w := job("w", "q", 0, 1, 1, 4)
				w.PodSets = append(w.PodSets, PodSet{Name: "driver", Count: 1, Requests: Resources{"cpu": 1000},
					Nodes: labelFilter{key: productKey, want: "B200"}})
				return w
			}(), wantFlavor: "a100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, Options{})
			productFlavors(t, e)
			mustCQ(t, e, newCQ("q", "", []string{"a100", "h100"}, []int64{8, 4}, twoGroups))
			mustWL(t, e, tc.w)
			res := cycle(t, e)
			if tc.wantReason != "" {
				p, _ := pendingReason(res, "w")
				if len(res.Admitted) != 0 || p.Reason != tc.wantReason || !strings.Contains(p.Message, tc.wantMessage) {
					t.Fatalf("%s; want %s containing %q", fmtResult(res), tc.wantReason, tc.wantMessage)
				}
				return
			}
			if len(res.Admitted) != 1 || res.Admitted[0].Admission.PodSets[0].Flavors[gpu] != tc.wantFlavor {
				t.Fatalf("%s; want admitted on %s", fmtResult(res), tc.wantFlavor)
			}
		})
	}
}

// A flavor relabelled to match frees the workloads it held, and one
// relabelled away no longer takes new ones.
func TestFlavorRelabelRequeues(t *testing.T) {
	e := newEngine(t, Options{})
	productFlavors(t, e)
	mustCQ(t, e, newCQ("q", "", []string{"a100", "h100"}, []int64{8, 8}))
	mustWL(t, e, constrained(job("w", "q", 0, 1, 1, 4), labelFilter{key: productKey, want: "B200"}))
	if p, _ := pendingReason(cycle(t, e), "w"); p.Reason != NoMatchingFlavor || !p.Reason.NeedsChange() {
		t.Fatalf("first cycle: %+v, want NoMatchingFlavor", p)
	}
	if res := cycle(t, e); len(res.Admitted) != 0 {
		t.Fatalf("held workload admitted without a change: %s", fmtResult(res))
	}
	if err := e.UpsertFlavor(Flavor{Name: "h100", NodeLabels: map[string]string{productKey: "B200"}}); err != nil {
		t.Fatal(err)
	}
	res := cycle(t, e)
	if len(res.Admitted) != 1 || res.Admitted[0].Admission.PodSets[0].Flavors[gpu] != "h100" {
		t.Fatalf("after relabelling h100 to B200: %s; want admitted on h100", fmtResult(res))
	}
	e.DeleteFlavor("a100") // its labels are forgotten: it rules nothing out
	mustWL(t, e, constrained(job("x", "q", 0, 2, 1, 4), labelFilter{key: productKey, want: "A100"}))
	if res := cycle(t, e); len(res.Admitted) != 1 || res.Admitted[0].Key.Name != "x" {
		t.Fatalf("after deleting a100's labels: %s; want x admitted", fmtResult(res))
	}
}

// Preemption seeks victims only in a flavor the preemptor's pods may use.
func TestPreemptionOnlyInOpenFlavors(t *testing.T) {
	e := newEngine(t, Options{})
	productFlavors(t, e)
	mustCQ(t, e, newCQ("q", "", []string{"a100", "h100"}, []int64{4, 4}, preempt(PreemptionPolicy{WithinClusterQueue: PreemptLowerPriority})))
	low := map[string]Workload{"on-a100": job("on-a100", "q", 0, 1, 1, 4), "on-h100": job("on-h100", "q", 0, 2, 1, 4)}
	mustWL(t, e, low["on-a100"], low["on-h100"])
	res := cycle(t, e)
	confirm(t, e, low, res)
	if len(res.Admitted) != 2 {
		t.Fatalf("setup: %s", fmtResult(res))
	}
	mustWL(t, e, constrained(job("p", "q", 5, 3, 1, 4), labelFilter{key: productKey, want: "H100"}))
	res = cycle(t, e)
	if got := victimNames(res); !eqStrings(got, []string{"on-h100"}) {
		t.Fatalf("victims %v, want [on-h100] (on-a100 runs on a flavor p cannot use): %s", got, fmtResult(res))
	}
}
