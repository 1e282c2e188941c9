package admission

import (
	"fmt"
	"strings"
	"testing"
)

// labelled labels the queue's flavors a100 and h100 with their GPU product
// and zone z1.
func labelled(cq *ClusterQueue) {
	for gi := range cq.ResourceGroups {
		for fi, f := range cq.ResourceGroups[gi].Flavors {
			switch f.Flavor {
			case "a100":
				cq.ResourceGroups[gi].Flavors[fi].NodeLabels = map[string]string{productKey: "A100", "zone": "z1"}
			case "h100":
				cq.ResourceGroups[gi].Flavors[fi].NodeLabels = map[string]string{productKey: "H100", "zone": "z1"}
			}
		}
	}
}

// twoGroups adds a cpu group of one flavor, labelled cpu-kind=x86, to the
// queue.
func twoGroups(cq *ClusterQueue) {
	cq.ResourceGroups = append(cq.ResourceGroups, ResourceGroup{CoveredResources: []ResourceName{"cpu"},
		Flavors: []FlavorQuotas{{Flavor: "plain", Resources: map[ResourceName]Quota{"cpu": {Nominal: 64_000}},
			NodeLabels: map[string]string{"cpu-kind": "x86"}}}})
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
			wantMessage: `no flavor of ClusterQueue "q" for nvidia.com/gpu has nodes the pods may run on (flavors a100 (` + productKey +
				`=A100,zone=z1), h100 (` + productKey + `=H100,zone=z1)): change the pods' node selector or affinity, or add a flavor ` +
				`whose nodeLabels they match; pod set main: nodeSelector ` + productKey + `=B200`},
		{name: "a later group no flavor of which matches: held, not waiting for the full first group",
			w: func() Workload {
				w := job("w", "q", 0, 1, 3, 4) // more GPUs than either flavor has
				w.PodSets[0].Requests["cpu"] = 1000
				w.PodSets[0].Nodes = labelFilter{key: "cpu-kind", want: "arm"}
				return w
			}(), wantReason: NoMatchingFlavor, wantMessage: `for cpu has nodes the pods may run on (flavors plain (cpu-kind=x86))`},
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
			mustCQ(t, e, newCQ("q", "", []string{"a100", "h100"}, []int64{8, 4}, twoGroups, labelled))
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

// A flavor relabelled to match frees the workloads it held, and one whose
// labels are gone rules nothing out.
func TestFlavorRelabelRequeues(t *testing.T) {
	e := newEngine(t, Options{})
	cq := newCQ("q", "", []string{"a100", "h100"}, []int64{8, 8}, labelled)
	mustCQ(t, e, cq)
	mustWL(t, e, constrained(job("w", "q", 0, 1, 1, 4), labelFilter{key: productKey, want: "B200"}))
	if p, _ := pendingReason(cycle(t, e), "w"); p.Reason != NoMatchingFlavor || !p.Reason.NeedsChange() {
		t.Fatalf("first cycle: %+v, want NoMatchingFlavor", p)
	}
	if res := cycle(t, e); len(res.Admitted) != 0 {
		t.Fatalf("held workload admitted without a change: %s", fmtResult(res))
	}
	cq.ResourceGroups[0].Flavors[1].NodeLabels = map[string]string{productKey: "B200"}
	mustCQ(t, e, cq)
	res := cycle(t, e)
	if len(res.Admitted) != 1 || res.Admitted[0].Admission.PodSets[0].Flavors[gpu] != "h100" {
		t.Fatalf("after relabelling h100 to B200: %s; want admitted on h100", fmtResult(res))
	}
	cq.ResourceGroups[0].Flavors[0].NodeLabels = nil
	mustCQ(t, e, cq)
	mustWL(t, e, constrained(job("x", "q", 0, 2, 1, 4), labelFilter{key: productKey, want: "A100"}))
	if res := cycle(t, e); len(res.Admitted) != 1 || res.Admitted[0].Key.Name != "x" {
		t.Fatalf("after a100 lost its labels: %s; want x admitted", fmtResult(res))
	}
}

// Preemption seeks victims only in a flavor the preemptor's pods may use.
func TestPreemptionOnlyInOpenFlavors(t *testing.T) {
	e := newEngine(t, Options{})
	mustCQ(t, e, newCQ("q", "", []string{"a100", "h100"}, []int64{4, 4}, labelled, preempt(PreemptionPolicy{WithinClusterQueue: PreemptLowerPriority})))
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

// Tenants write the pods' constraints: a flavor's cache of them stays
// bounded however many distinct ones arrive, and still answers right.
func TestFlavorMatchCacheBounded(t *testing.T) {
	nm := newNames()
	fn := newFlavorNodes(map[string]string{productKey: "H100"})
	for i := range 3 * filterCacheMax {
		want := "H100"
		if i%2 == 1 {
			want = fmt.Sprintf("other-%d", i)
		}
		f := labelFilter{key: productKey, want: want, prefKey: "n", pref: fmt.Sprint(i)}
		ps := &podSetSpec{nodes: f, filterHash: nm.hashFilter(f.Key())}
		if got := fn.admits(ps); got != (i%2 == 0) {
			t.Fatalf("filter %d: admits = %v", i, got)
		}
		if len(fn.open) > filterCacheMax {
			t.Fatalf("cache holds %d entries, bound %d", len(fn.open), filterCacheMax)
		}
	}
}
