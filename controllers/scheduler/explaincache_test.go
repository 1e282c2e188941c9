package scheduler

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/admission"
)

// TestExplanationsPerCycle: a workload is explained once per cycle however
// often it is read, with the position and standing of each read; a cycle
// forgets the explanations, and a workload admitted since is reported
// gone rather than served from the cache.
func TestExplanationsPerCycle(t *testing.T) {
	const gpu = admission.ResourceName("nvidia.com/gpu")
	e, err := admission.New(admission.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	cq := func(gpus int64) admission.ClusterQueue {
		return admission.ClusterQueue{Name: "a", FairShareWeight: 1000, QueueingStrategy: admission.BestEffortFIFO,
			ResourceGroups: []admission.ResourceGroup{{CoveredResources: []admission.ResourceName{gpu},
				Flavors: []admission.FlavorQuotas{{Flavor: "h200", Resources: map[admission.ResourceName]admission.Quota{gpu: {Nominal: gpus * 1000}}}}}}}
	}
	if err := e.UpsertClusterQueue(cq(0)); err != nil {
		t.Fatal(err)
	}
	w := admission.Workload{Key: admission.WorkloadKey{Namespace: "ns", Name: "w"}, ClusterQueue: "a", CreationTime: 1,
		PodSets: []admission.PodSet{{Name: "main", Count: 1, Requests: admission.Resources{gpu: 1000}}}}
	if err := e.UpsertWorkload(w); err != nil {
		t.Fatal(err)
	}
	page, ok := e.PendingOrder(admission.PendingQuery{ClusterQueue: "a"})
	if !ok || len(page.Items) != 1 {
		t.Fatalf("page %+v", page)
	}
	item := page.Items[0]

	var c explanations
	first, ok := c.explain(e, item, page.FairShare)
	if !ok || first.Explanation.Reason == "" {
		t.Fatalf("first read: %+v, %v", first, ok)
	}
	// A change the cache does not see until the next cycle: the read
	// before the cycle is served from it, the read after is explained anew.
	if err := e.UpsertClusterQueue(cq(1)); err != nil {
		t.Fatal(err)
	}
	item.PositionInClusterQueue = 7
	again, ok := c.explain(e, item, page.FairShare)
	if !ok || again.Explanation.Reason != first.Explanation.Reason || again.Explanation.Position != 7 {
		t.Fatalf("second read in the same cycle: %+v, want the first's reason at position 7", again.Explanation)
	}
	c.reset()
	fresh, ok := c.explain(e, item, page.FairShare)
	if !ok || fresh.Explanation.Reason == first.Explanation.Reason {
		t.Fatalf("after a cycle: %+v, want an explanation of the new quota", fresh.Explanation)
	}

	if res := e.Cycle(time.Unix(1_800_000_000, 0)); len(res.Admitted) != 1 {
		t.Fatalf("cycle admitted %v", res.Admitted)
	}
	if _, ok := c.explain(e, item, page.FairShare); ok {
		t.Fatal("an admitted workload was served from the cache as pending")
	}
}
