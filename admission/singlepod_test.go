package admission

import (
	"slices"
	"strings"
	"testing"
)

// singlePodEngine is provEngine with flavor h200 booking IfNeeded under the
// given single-pod policy.
func singlePodEngine(t *testing.T, mode ProvisioningMode, policy SinglePodPolicy, nodes []Node, pools ...Pool) *Engine {
	t.Helper()
	e := provEngine(t, mode, nodes, pools...)
	f := Flavor{Name: "h200", Levels: []string{zoneKey, rackKey, hostKey}, Provisioning: ProvisioningPolicy{Mode: mode, SinglePodJobs: policy}}
	if err := e.UpsertFlavor(f); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestSinglePodJobs: which workloads book on a flavor that provisions, by
// the flavor's single-pod policy. The one node is full, so every workload
// needs new capacity.
func TestSinglePodJobs(t *testing.T) {
	full := []Node{sized(rackNode("n1", "a", "r1", 0), 8)}
	pools := []Pool{rackPool("pool-r1", "r1")}
	onePod := job("g", "a", 0, 1, 1, 1)
	twoSets := job("g", "a", 0, 1, 1, 1)
	twoSets.PodSets = append(twoSets.PodSets, PodSet{Name: "worker", Count: 1, Requests: Resources{gpu: 1000}})
	scaleUp := func(nodes map[string]int32) *ProvisioningPlan {
		return &ProvisioningPlan{Class: ClassAtomicScaleUp, NewNodes: nodes, Flavor: "h200", Attempt: 1}
	}
	tests := []struct {
		name       string
		mode       ProvisioningMode
		policy     SinglePodPolicy
		pools      []Pool
		w          Workload
		wantDomain []string // nil: unpinned
		wantPlan   *ProvisioningPlan
	}{
		{name: "by default a single pod is admitted unbooked, unpinned", mode: ProvisionIfNeeded, pools: pools, w: onePod},
		{name: "Autoscaler: the same", mode: ProvisionIfNeeded, policy: SinglePodAutoscaler, pools: pools, w: onePod},
		{name: "without pools it is admitted unbooked too", mode: ProvisionIfNeeded, w: onePod},
		{name: "Book: it books a node of its own", mode: ProvisionIfNeeded, policy: SinglePodBook, pools: pools, w: onePod,
			wantPlan: scaleUp(map[string]int32{"pool-r1": 1})},
		{name: "Book without pools: an unpinned request", mode: ProvisionIfNeeded, policy: SinglePodBook, w: onePod,
			wantPlan: scaleUp(map[string]int32{})},
		{name: "a gang still books under the default", mode: ProvisionIfNeeded, pools: pools, w: job("g", "a", 0, 1, 2, 1),
			wantPlan: scaleUp(map[string]int32{"pool-r1": 1})},
		{name: "two pod sets of one pod each are a gang", mode: ProvisionIfNeeded, pools: pools, w: twoSets,
			wantPlan: scaleUp(map[string]int32{"pool-r1": 1})},
		{name: "a topology-bound single pod still books, pinned", mode: ProvisionIfNeeded, pools: pools,
			w: gang("g", 1, 1, TopologyRequired, rackKey), wantDomain: []string{"a", "r1"}, wantPlan: scaleUp(map[string]int32{"pool-r1": 1})},
		{name: "a single pod that prefers a rack still books, pinned", mode: ProvisionIfNeeded, pools: pools,
			w: gang("g", 1, 1, TopologyPreferred, rackKey), wantDomain: []string{"a", "r1"}, wantPlan: scaleUp(map[string]int32{"pool-r1": 1})},
		{name: "Always books every admission, single pods too", mode: ProvisionAlways, pools: pools, w: onePod,
			wantPlan: scaleUp(map[string]int32{"pool-r1": 1})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := singlePodEngine(t, tc.mode, tc.policy, full, tc.pools...)
			mustWL(t, e, tc.w)
			res := cycle(t, e)
			if len(res.Admitted) != 1 {
				t.Fatalf("%s", fmtResult(res))
			}
			a := res.Admitted[0].Admission
			if got := a.Topology; (got == nil) != (tc.wantDomain == nil) || (got != nil && !slices.Equal(got.Domain, tc.wantDomain)) {
				t.Fatalf("topology %+v, want domain %v", got, tc.wantDomain)
			}
			if !samePlan(a.Provisioning, tc.wantPlan) {
				t.Fatalf("plan %+v, want %+v", a.Provisioning, tc.wantPlan)
			}
		})
	}
}

// TestSinglePodWaitsForCapacityThatCanCome: a single pod left to the
// autoscaler is not admitted when neither a node nor a pool can take it, so
// its quota is not held for capacity that cannot come; it is admitted once a
// pool can grow, and reserves nothing in the pool.
func TestSinglePodWaitsForCapacityThatCanCome(t *testing.T) {
	full := []Node{sized(rackNode("n1", "a", "r1", 0), 8)}
	e := singlePodEngine(t, ProvisionIfNeeded, "", full, withAvail(rackPool("pool-r1", "r1"), 0))
	mustWL(t, e, job("g", "a", 0, 1, 1, 1))
	res := cycle(t, e)
	if p, ok := pendingReason(res, "g"); len(res.Admitted) != 0 || !ok || p.Reason != TopologyUnavailable {
		t.Fatalf("%s; want g waiting as %s", fmtResult(res), TopologyUnavailable)
	}
	if err := e.UpsertPool(withAvail(rackPool("pool-r1", "r1"), 1)); err != nil {
		t.Fatal(err)
	}
	res = cycle(t, e)
	if len(res.Admitted) != 1 || res.Admitted[0].Admission.Provisioning != nil {
		t.Fatalf("%s; want g admitted without a booking once the pool can grow", fmtResult(res))
	}
	if r := e.topo.pools["pool-r1"].reserved; r != 0 {
		t.Fatalf("pool-r1 reserves %d nodes for a pod left to the autoscaler, want 0", r)
	}
}

// TestSinglePodThatNoPoolCanTake: a pod too large for every node and pool is
// told so, as a gang is, rather than admitted to wait forever.
func TestSinglePodThatNoPoolCanTake(t *testing.T) {
	e := singlePodEngine(t, ProvisionIfNeeded, "", []Node{sized(rackNode("n1", "a", "r1", 8), 8)}, rackPool("pool-r1", "r1"))
	mustWL(t, e, job("g", "a", 0, 1, 1, 16))
	res := cycle(t, e)
	if p, _ := pendingReason(res, "g"); len(res.Admitted) != 0 || p.Reason != ExceedsDomainCapacity {
		t.Fatalf("%s; want g %s", fmtResult(res), ExceedsDomainCapacity)
	}
}

func TestSinglePodPolicyValidation(t *testing.T) {
	tests := []struct {
		p       ProvisioningPolicy
		wantErr string
	}{
		{p: ProvisioningPolicy{Mode: ProvisionIfNeeded}},
		{p: ProvisioningPolicy{Mode: ProvisionIfNeeded, SinglePodJobs: SinglePodBook}},
		{p: ProvisioningPolicy{Mode: ProvisionIfNeeded, SinglePodJobs: SinglePodAutoscaler}},
		{p: ProvisioningPolicy{Mode: ProvisionAlways, SinglePodJobs: SinglePodBook}},
		{p: ProvisioningPolicy{Mode: ProvisionNever, SinglePodJobs: SinglePodAutoscaler}},
		{p: ProvisioningPolicy{Mode: ProvisionAlways, SinglePodJobs: SinglePodAutoscaler}, wantErr: "contradict provisioning \"Always\""},
		{p: ProvisioningPolicy{Mode: ProvisionIfNeeded, SinglePodJobs: "Sometimes"}, wantErr: "must be Book or Autoscaler"},
	}
	for _, tc := range tests {
		err := newEngine(t, DefaultOptions()).UpsertFlavor(Flavor{Name: "f", Provisioning: tc.p})
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%+v: error %v, want %q", tc.p, err, tc.wantErr)
		}
	}
	for _, tc := range []struct {
		p    ProvisioningPolicy
		want SinglePodPolicy
	}{
		{ProvisioningPolicy{Mode: ProvisionIfNeeded}, SinglePodAutoscaler},
		{ProvisioningPolicy{Mode: ProvisionAlways}, SinglePodBook},
		{ProvisioningPolicy{Mode: ProvisionIfNeeded, SinglePodJobs: SinglePodBook}, SinglePodBook},
	} {
		if got := tc.p.singlePods(); got != tc.want {
			t.Errorf("%+v: single pods %q, want %q", tc.p, got, tc.want)
		}
	}
}
