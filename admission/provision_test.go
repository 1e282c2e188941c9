package admission

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// sized gives n an allocatable of gpus GPUs.
func sized(n Node, gpus int64) Node {
	n.Allocatable = Resources{gpu: gpus * 1000}
	return n
}

// rackDomain is rack r of zone z of flavor h200, as a failed domain.
func rackDomain(z, r string) TopologyAssignment {
	return TopologyAssignment{Flavor: "h200", Level: rackKey, Levels: []string{zoneKey, rackKey}, Domain: []string{z, r}}
}

// rackPool is a pool of up to 4 more 8-GPU nodes of flavor h200 in zone a, rack
// rack.
func rackPool(name, rack string) Pool {
	return Pool{Name: name, Flavor: "h200", Available: 4, NodeCapacity: Resources{gpu: 8000},
		Labels: map[string]string{zoneKey: "a", rackKey: rack}}
}

// withAvail is p with n more nodes available.
func withAvail(p Pool, n int32) Pool {
	p.Available = n
	return p
}

// provEngine is topoEngine with flavor h200 booking capacity in mode, and the
// nodes and pools given.
func provEngine(t *testing.T, mode ProvisioningMode, nodes []Node, pools ...Pool) *Engine {
	t.Helper()
	e := topoEngine(t, nodes...)
	if err := e.UpsertFlavor(Flavor{Name: "h200", Levels: []string{zoneKey, rackKey, hostKey}, Provisioning: ProvisioningPolicy{Mode: mode}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pools {
		if err := e.UpsertPool(p); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func TestProvisioningPlacement(t *testing.T) {
	oneNode := []Node{rackNode("n1", "a", "r1", 8)}
	sizedNode := []Node{sized(rackNode("n1", "a", "r1", 8), 8)}
	busyNodes := []Node{sized(rackNode("n1", "a", "r1", 0), 8), sized(rackNode("n2", "a", "r1", 8), 8)}
	pools := []Pool{rackPool("pool-r1", "r1"), rackPool("pool-r2", "r2")}
	tests := []struct {
		name       string
		mode       ProvisioningMode
		nodes      []Node
		pools      []Pool
		w          Workload
		avoid      []string // a rack whose booking failed
		wantDomain []string // nil: unpinned
		wantPlan   *ProvisioningPlan
		wantReason PendingReason
		wantMsg    string
	}{
		{
			name: "fits existing capacity: no booking", mode: ProvisionIfNeeded, nodes: oneNode, pools: pools,
			w: gang("g", 1, 8, TopologyRequired, rackKey), wantDomain: []string{"a", "r1"},
		},
		{
			name: "the rack needing the fewest new nodes, its free capacity used first", mode: ProvisionIfNeeded, nodes: oneNode, pools: pools,
			w: gang("g", 2, 8, TopologyRequired, rackKey), wantDomain: []string{"a", "r1"},
			wantPlan: &ProvisioningPlan{Class: ClassAtomicScaleUp, NewNodes: map[string]int32{"pool-r1": 1}, Flavor: "h200", Attempt: 1},
		},
		{
			name: "a rack whose booking failed is avoided", mode: ProvisionIfNeeded, nodes: oneNode, pools: pools,
			w: gang("g", 2, 8, TopologyRequired, rackKey), avoid: []string{"a", "r1"}, wantDomain: []string{"a", "r2"},
			wantPlan: &ProvisioningPlan{Class: ClassAtomicScaleUp, NewNodes: map[string]int32{"pool-r2": 2}, Flavor: "h200", Attempt: 2},
		},
		{
			name: "a failed rack is tried again when no other rack can take the gang", mode: ProvisionIfNeeded, nodes: oneNode,
			pools: []Pool{rackPool("pool-r1", "r1")}, w: gang("g", 2, 8, TopologyRequired, rackKey), avoid: []string{"a", "r1"},
			wantDomain: []string{"a", "r1"}, wantPlan: &ProvisioningPlan{Class: ClassAtomicScaleUp, NewNodes: map[string]int32{"pool-r1": 1}, Flavor: "h200", Attempt: 2},
		},
		{
			name: "Always books existing capacity with a check", mode: ProvisionAlways, nodes: oneNode, pools: pools,
			w: gang("g", 1, 8, TopologyRequired, rackKey), wantDomain: []string{"a", "r1"},
			wantPlan: &ProvisioningPlan{Class: ClassCheckCapacity, NewNodes: map[string]int32{}, Flavor: "h200", Attempt: 1},
		},
		{
			name: "a gang no rack can ever hold says so", mode: ProvisionIfNeeded, nodes: sizedNode, pools: pools,
			w: gang("g", 6, 8, TopologyRequired, rackKey), wantReason: ExceedsDomainCapacity,
			wantMsg: "no example.com/rack domain of flavor h200 can ever hold all 6 pods (48 nvidia.com/gpu), even with its nodes and its largest CapacityPool at its maximum (a scale-up grows one node group); the largest, example.com/rack=r1, has 40",
		},
		{
			// cluster-autoscaler's best-effort-atomic class grows one node
			// group per request.
			name: "a scale-up is planned in one pool: the one that alone holds the rest", mode: ProvisionIfNeeded, nodes: oneNode,
			pools: []Pool{withAvail(rackPool("pool-r1a", "r1"), 1), rackPool("pool-r1b", "r1")},
			w:     gang("g", 3, 8, TopologyRequired, rackKey), wantDomain: []string{"a", "r1"},
			wantPlan: &ProvisioningPlan{Class: ClassAtomicScaleUp, NewNodes: map[string]int32{"pool-r1b": 2}, Flavor: "h200", Attempt: 1},
		},
		{
			name: "of two pools that each hold the rest, the one needing the fewest nodes", mode: ProvisionIfNeeded, nodes: oneNode,
			pools: []Pool{rackPool("pool-r1a", "r1"), {Name: "pool-r1b", Flavor: "h200", Available: 4, NodeCapacity: Resources{gpu: 16000},
				Labels: map[string]string{zoneKey: "a", rackKey: "r1"}}},
			w: gang("g", 3, 8, TopologyRequired, rackKey), wantDomain: []string{"a", "r1"},
			wantPlan: &ProvisioningPlan{Class: ClassAtomicScaleUp, NewNodes: map[string]int32{"pool-r1b": 1}, Flavor: "h200", Attempt: 1},
		},
		{
			name: "two pools that only together hold the gang never do", mode: ProvisionIfNeeded, nodes: sizedNode,
			pools: []Pool{withAvail(rackPool("pool-r1a", "r1"), 1), withAvail(rackPool("pool-r1b", "r1"), 1)},
			w:     gang("g", 3, 8, TopologyRequired, rackKey), wantReason: ExceedsDomainCapacity,
			wantMsg: "the largest, example.com/rack=r1, has 16",
		},
		{
			name: "a rack-bound gang that fits no node of a flavor that never books says so", mode: ProvisionNever, nodes: sizedNode,
			w: gang("g", 2, 8, TopologyRequired, rackKey), wantReason: ExceedsDomainCapacity, wantMsg: "even with its nodes; the largest, example.com/rack=r1, has 8: ask for a coarser level",
		},
		{
			name: "without pools, a gang without topology is booked unpinned", mode: ProvisionIfNeeded, nodes: oneNode,
			w: job("g", "a", 0, 1, 2, 8), wantPlan: &ProvisioningPlan{Class: ClassAtomicScaleUp, NewNodes: map[string]int32{}, Flavor: "h200", Attempt: 1},
		},
		{
			name: "without pools, a rack-bound gang waits and the message says why", mode: ProvisionIfNeeded, nodes: oneNode,
			w: gang("g", 2, 8, TopologyRequired, rackKey), wantReason: TopologyUnavailable, wantMsg: "has no CapacityPool",
		},
		{
			name: "Never does not book: a gang that fits the rack once its nodes are free waits", mode: ProvisionNever, nodes: busyNodes, pools: pools,
			w: gang("g", 2, 8, TopologyRequired, rackKey), wantReason: TopologyUnavailable,
		},
		{
			name: "a node's unknown capacity never makes a gang unplaceable", mode: ProvisionNever, nodes: oneNode,
			w: gang("g", 2, 8, TopologyRequired, rackKey), wantReason: TopologyUnavailable,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := provEngine(t, tc.mode, tc.nodes, tc.pools...)
			if tc.avoid != nil {
				tc.w.Booking = &Booking{Attempt: 1, Failures: 1, State: BookingCapacityNotFound, Flavor: "h200",
					FailedDomains: []TopologyAssignment{rackDomain(tc.avoid[0], tc.avoid[1])}}
			}
			mustWL(t, e, tc.w)
			res := cycle(t, e)
			if tc.wantReason != "" {
				p, _ := pendingReason(res, "g")
				if len(res.Admitted) != 0 || p.Reason != tc.wantReason || !strings.Contains(p.Message, tc.wantMsg) {
					t.Fatalf("%s; want %s containing %q", fmtResult(res), tc.wantReason, tc.wantMsg)
				}
				return
			}
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

// TestProvisioningReservations: nodes planned for one gang are not promised to
// the next; once the capacity exists, the reservation moves onto the real nodes.
func TestProvisioningReservations(t *testing.T) {
	e := provEngine(t, ProvisionIfNeeded, []Node{rackNode("n1", "a", "r1", 8)},
		rackPool("pool-r1", "r1"), rackPool("pool-r2", "r2"))
	g1, g2 := gang("g1", 2, 8, TopologyRequired, rackKey), gang("g2", 2, 8, TopologyRequired, rackKey)
	g2.CreationTime = 2
	specs := specMap(g1, g2)
	mustWL(t, e, g1, g2)
	res := cycle(t, e)
	if len(res.Admitted) != 2 {
		t.Fatalf("%s", fmtResult(res))
	}
	if p := res.Admitted[0].Admission.Provisioning; p == nil || !maps.Equal(p.NewNodes, map[string]int32{"pool-r1": 1}) {
		t.Fatalf("g1 plan %+v, want one node of pool-r1 (with n1)", p)
	}
	if p := res.Admitted[1].Admission.Provisioning; p == nil || p.NewNodes["pool-r1"]+p.NewNodes["pool-r2"] != 2 {
		t.Fatalf("g2 plan %+v, want two new nodes (n1 is promised to g1)", p)
	}
	confirm(t, e, specs, res)

	// g1's booking is provisioned: its new node is still reserved in the pool
	// until it exists (the autoscaler answers once it asked the cloud).
	w := specs["g1"]
	w.Booking.State = BookingProvisioned
	mustWL(t, e, w)
	if got := e.topo.pools["pool-r1"].reserved + e.topo.pools["pool-r2"].reserved; got != 3 {
		t.Fatalf("pools reserve %d nodes once g1 was provisioned, want 3 (g1's is still coming)", got)
	}
	// The node joins: the reservation moves from the pool onto the nodes.
	if err := e.UpsertNode(rackNode("r1-new", "a", "r1", 8)); err != nil {
		t.Fatal(err)
	}
	if err := checkInvariants(e); err != nil {
		t.Fatal(err)
	}
	reserved := e.topo.pools["pool-r1"].reserved + e.topo.pools["pool-r2"].reserved
	if reserved != 2 {
		t.Fatalf("pools reserve %d nodes after g1's node joined, want g2's 2", reserved)
	}
	if got := e.workloads[key("g1")].placed.shares; len(got) != 2 {
		t.Fatalf("g1 reserves %+v, want both r1 nodes", got)
	}
}

// TestProvisioningBackoff: a workload whose booking failed is not admitted before
// its retry time, and is admitted in the first cycle after it.
func TestProvisioningBackoff(t *testing.T) {
	e := provEngine(t, ProvisionIfNeeded, []Node{rackNode("n1", "a", "r1", 8)})
	w := gang("g", 1, 8, TopologyRequired, rackKey)
	w.Booking = &Booking{Attempt: 1, Failures: 1, State: BookingFailed, Flavor: "h200", RetryAfter: t0.Add(time.Minute).UnixNano()}
	mustWL(t, e, w)
	res := cycle(t, e)
	if p, _ := pendingReason(res, "g"); len(res.Admitted) != 0 || p.Reason != ProvisioningBackoff || !strings.Contains(p.Message, "waiting until") {
		t.Fatalf("%s; want ProvisioningBackoff", fmtResult(res))
	}
	if res := e.Cycle(t0.Add(30 * time.Second)); len(res.Admitted) != 0 {
		t.Fatalf("admitted before NotBefore: %s", fmtResult(res))
	}
	res = e.Cycle(t0.Add(61 * time.Second))
	if got := admittedNames(res); !eqStrings(got, []string{"g"}) {
		t.Fatalf("after NotBefore admitted %v, want g", got)
	}
}

// TestPoolValidation: bad pools are rejected and change nothing.
func TestPoolValidation(t *testing.T) {
	e := topoEngine(t)
	for _, p := range []Pool{{Name: "", Flavor: "h200"}, {Name: "p", Flavor: "h200", Available: -1},
		{Name: "p", Flavor: "h200", NodeCapacity: Resources{gpu: -1}}} {
		if err := e.UpsertPool(p); err == nil {
			t.Errorf("pool %+v accepted", p)
		}
	}
	if err := e.UpsertFlavor(Flavor{Name: "x", Provisioning: ProvisioningPolicy{Mode: "Sometimes"}}); err == nil || !strings.Contains(err.Error(), "IfNeeded") {
		t.Errorf("flavor with provisioning Sometimes: %v", err)
	}
	if err := e.UpsertFlavor(Flavor{Name: "x", Provisioning: ProvisioningPolicy{Mode: ProvisionIfNeeded, Backoff: -time.Second}}); err == nil {
		t.Errorf("flavor with a negative backoff accepted")
	}
	if len(e.topo.pools) != 0 {
		t.Fatalf("invalid pools stored: %v", e.topo.pools)
	}
}

// TestIdleWhileWaiting: free GPUs scattered over racks count as idle while a
// rack-bound gang waits for them, and while a gang waits for booked capacity.
func TestIdleWhileWaiting(t *testing.T) {
	e := topoEngine(t, rackNode("n1", "a", "r1", 4), rackNode("n2", "a", "r2", 4))
	if got := e.IdleWhileWaiting(); len(got) != 0 {
		t.Fatalf("idle %v with nobody waiting", got)
	}
	mustWL(t, e, gang("g", 1, 8, TopologyRequired, rackKey))
	cycle(t, e)
	want := []IdleCapacity{{Flavor: "h200", Resource: gpu, Amount: 8000}}
	if got := e.IdleWhileWaiting(); !slices.Equal(got, want) {
		t.Fatalf("idle %v, want %v", got, want)
	}
	e.DeleteWorkload(key("g"))
	if got := e.IdleWhileWaiting(); len(got) != 0 {
		t.Fatalf("idle %v after the gang left", got)
	}

	p := provEngine(t, ProvisionIfNeeded, []Node{rackNode("n1", "a", "r1", 4)}, rackPool("pool-r1", "r1"))
	mustWL(t, p, gang("g", 1, 8, TopologyRequired, rackKey))
	if res := cycle(t, p); len(res.Admitted) != 1 || res.Admitted[0].Admission.Provisioning == nil {
		t.Fatalf("%s: want an admission that books a node", fmtResult(res))
	}
	want = []IdleCapacity{{Flavor: "h200", Resource: gpu, Amount: 4000}}
	if got := p.IdleWhileWaiting(); !slices.Equal(got, want) {
		t.Fatalf("idle %v while the gang waits for its node, want %v", got, want)
	}
}
