package admission

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// hostPool is a pool of up to avail more nodes of gpus GPUs each, of flavor
// h200 in zone a, rack rack: its template names no hostname.
func hostPool(name, rack string, gpus int64, avail int32) Pool {
	return Pool{Name: name, Flavor: "h200", Available: avail, NodeCapacity: Resources{gpu: gpus * 1000},
		Labels: map[string]string{zoneKey: "a", rackKey: rack, "pool": name}}
}

// poolNode is a node that pool p created, named name, with gpus free.
func poolNode(p Pool, name string, gpus int64) Node {
	labels := maps.Clone(p.Labels)
	labels[hostKey] = name
	return Node{Name: name, Flavors: []string{"h200"}, Labels: labels, Free: Resources{gpu: gpus * 1000},
		Allocatable: maps.Clone(p.NodeCapacity)}
}

// busyNode is a node of rack r1 of 8 GPUs, with free GPUs free.
func busyNode(name string, free int64) Node { return sized(rackNode(name, "a", "r1", free), 8) }

func TestHostGangBooksOneNewNode(t *testing.T) {
	small, big, huge := hostPool("small", "r1", 4, 4), hostPool("big", "r1", 8, 4), hostPool("huge", "r2", 16, 4)
	// Two nodes with room for one 4-GPU pod each: no node holds the gang.
	halves := []Node{busyNode("n1", 4), busyNode("n2", 4)}
	tests := []struct {
		name       string
		nodes      []Node
		pools      []Pool
		w          Workload
		wantDomain []string
		wantPool   string
		wantReason PendingReason
		wantMsg    []string
	}{
		{
			name: "two 4-GPU pods on one new 8-GPU node, not one pod on each of two half-free nodes", nodes: halves, pools: []Pool{small, big},
			w: gang("g", 2, 4, TopologyRequired, hostKey), wantDomain: []string{"a", "r1", ""}, wantPool: "big",
		},
		{
			name: "the pool whose node holds the gang with the least left over", pools: []Pool{huge, big},
			w: gang("g", 2, 4, TopologyRequired, hostKey), wantDomain: []string{"a", "r1", ""}, wantPool: "big",
		},
		{
			name: "a gang preferring one host books one new node before spreading over a rack", pools: []Pool{small, big},
			w: gang("g", 2, 4, TopologyPreferred, hostKey), wantDomain: []string{"a", "r1", ""}, wantPool: "big",
		},
		{
			name: "an existing node that holds the gang is used first", nodes: []Node{busyNode("n1", 8)}, pools: []Pool{big},
			w: gang("g", 2, 4, TopologyRequired, hostKey), wantDomain: []string{"a", "r1", "n1"},
		},
		{
			name:  "no pool's node holds the gang and no node ever could: the message compares the largest node with the need",
			nodes: []Node{sized(rackNode("n1", "a", "r1", 0), 4)}, pools: []Pool{small},
			w: gang("g", 2, 4, TopologyRequired, hostKey), wantReason: ExceedsDomainCapacity,
			wantMsg: []string{"even with its nodes and one new node of a CapacityPool", "it needs 8 nvidia.com/gpu on one node, the largest node a pool offers has 4 (pool small)"},
		},
		{
			name:  "no pool's node holds the gang, an existing node could once it empties: it waits, and says the pools cannot help",
			nodes: []Node{busyNode("n1", 0)}, pools: []Pool{small},
			w: gang("g", 2, 4, TopologyRequired, hostKey), wantReason: TopologyUnavailable,
			wantMsg: []string{"the largest node a pool offers has 4 (pool small)"},
		},
		{
			name: "two pods that each need a whole node are no gang one node holds", pools: []Pool{big},
			w: gang("g", 2, 8, TopologyRequired, hostKey), wantReason: ExceedsDomainCapacity,
			wantMsg: []string{"it needs 16 nvidia.com/gpu on one node, the largest node a pool offers has 8 (pool big)"},
		},
		{
			name: "a pool at its maximum: the gang waits for its node, and the message names the pool", nodes: []Node{busyNode("n1", 0)},
			pools: []Pool{small, withAvail(big, 0)},
			w:     gang("g", 2, 4, TopologyRequired, hostKey), wantReason: TopologyUnavailable,
			wantMsg: []string{"even with the nodes its CapacityPools can still create", "whole gang (big) can create no more nodes now"},
		},
		{
			name: "a pool whose template the pods do not tolerate is not booked", pools: []Pool{taintedPool(big, fuzzReserved)},
			w: gang("g", 2, 4, TopologyRequired, hostKey), wantReason: ExceedsDomainCapacity,
			wantMsg: []string{"pool carries taint reserved=true:NoSchedule that the pods do not tolerate"},
		},
		{
			name: "a gang that tolerates the pool's taint books it", pools: []Pool{taintedPool(big, fuzzReserved)},
			w:          tolerating(gang("g", 2, 4, TopologyRequired, hostKey), Toleration{Key: "reserved", Operator: TolerationExists}),
			wantDomain: []string{"a", "r1", ""}, wantPool: "big",
		},
		{
			name: "pods kept apart never share the new node", pools: []Pool{big},
			w: func() Workload {
				w := gang("g", 2, 1, TopologyRequired, hostKey)
				w.PodSets[0].Apart = []string{w.PodSets[0].Name}
				return w
			}(), wantReason: ExceedsDomainCapacity, wantMsg: []string{"no CapacityPool creates one that holds it (its pods' constraints"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := provEngine(t, ProvisionIfNeeded, tc.nodes, tc.pools...)
			mustWL(t, e, tc.w)
			res := cycle(t, e)
			if tc.wantReason != "" {
				p, _ := pendingReason(res, "g")
				if len(res.Admitted) != 0 || p.Reason != tc.wantReason {
					t.Fatalf("%s; want %s", fmtResult(res), tc.wantReason)
				}
				for _, m := range tc.wantMsg {
					if !strings.Contains(p.Message, m) {
						t.Errorf("message %q lacks %q", p.Message, m)
					}
				}
				return
			}
			if len(res.Admitted) != 1 {
				t.Fatalf("%s", fmtResult(res))
			}
			a := res.Admitted[0].Admission
			if a.Topology == nil || a.Topology.Level != hostKey || !slices.Equal(a.Topology.Domain, tc.wantDomain) {
				t.Fatalf("topology %+v, want hostname domain %q", a.Topology, tc.wantDomain)
			}
			if tc.wantPool == "" {
				if a.Provisioning != nil {
					t.Fatalf("plan %+v, want none", a.Provisioning)
				}
				return
			}
			want := &ProvisioningPlan{Class: ClassAtomicScaleUp, NewNodes: map[string]int32{tc.wantPool: 1}, Flavor: "h200", Attempt: 1}
			if !samePlan(a.Provisioning, want) || !a.Topology.AwaitsNode() {
				t.Fatalf("plan %+v awaiting a node %t, want %+v", a.Provisioning, a.Topology.AwaitsNode(), want)
			}
		})
	}
}

// TestHostGangNewNodeReserved: the pool's node booked for one gang is not
// promised to another; the second waits.
func TestHostGangNewNodeReserved(t *testing.T) {
	e := provEngine(t, ProvisionIfNeeded, nil, hostPool("big", "r1", 8, 1))
	g1, g2 := gang("g1", 2, 4, TopologyRequired, hostKey), gang("g2", 2, 4, TopologyRequired, hostKey)
	g2.CreationTime = 2
	mustWL(t, e, g1, g2)
	res := cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{"g1"}) {
		t.Fatalf("admitted %v, want g1 only: %s", got, fmtResult(res))
	}
	if p, _ := pendingReason(res, "g2"); p.Reason != TopologyUnavailable || !strings.Contains(p.Message, "can create no more nodes now") {
		t.Fatalf("g2 pending %+v, want TopologyUnavailable naming the pool", p)
	}
}

// TestHostGangPinnedToItsNode: a provisioned booking of a gang that must fit
// one node starts once the pool's node joined, pinned to it; the gang's
// reservation moves from the pool onto that node.
func TestHostGangPinnedToItsNode(t *testing.T) {
	big, other := hostPool("big", "r1", 8, 2), hostPool("other", "r1", 8, 2)
	e := provEngine(t, ProvisionIfNeeded, []Node{busyNode("n1", 4)}, big, other)
	g := gang("g", 2, 4, TopologyRequired, hostKey)
	specs := specMap(g)
	mustWL(t, e, g)
	res := cycle(t, e)
	if len(res.Admitted) != 1 || !res.Admitted[0].Admission.Topology.AwaitsNode() {
		t.Fatalf("%s: want an admission awaiting its new node", fmtResult(res))
	}
	confirm(t, e, specs, res)
	e.ReportBooking(key("g"), BookingReport{Attempt: 1, Answer: AnswerProvisioned, Message: "CapacityIsProvisioned"})
	if res := cycle(t, e); len(res.Bookings) != 0 {
		t.Fatalf("%s: the gang started before its node joined", fmtResult(res))
	}
	// A node of another pool, and one too busy to hold the gang, are not its node.
	for _, n := range []Node{poolNode(other, "other-1", 8), poolNode(big, "big-0", 4)} {
		if err := e.UpsertNode(n); err != nil {
			t.Fatal(err)
		}
	}
	if res := cycle(t, e); len(res.Bookings) != 0 {
		t.Fatalf("%s: pinned to a node that is not the booked pool's, or has no room", fmtResult(res))
	}
	if err := e.UpsertNode(poolNode(big, "big-1", 8)); err != nil {
		t.Fatal(err)
	}
	res = cycle(t, e)
	if len(res.Bookings) != 1 || res.Bookings[0].Action != BookingStart {
		t.Fatalf("%s: want the booking started once big-1 joined", fmtResult(res))
	}
	pin := res.Bookings[0].Topology
	if pin == nil || !slices.Equal(pin.Domain, []string{"a", "r1", "big-1"}) || pin.AwaitsNode() {
		t.Fatalf("started pinned to %+v, want big-1", pin)
	}
	// A rollback (the write failed) pins the same node again.
	e.Rollback(key("g"))
	res = cycle(t, e)
	if len(res.Bookings) != 1 || !slices.Equal(res.Bookings[0].Topology.Domain, pin.Domain) {
		t.Fatalf("%s: after a rollback, want the same pin", fmtResult(res))
	}
	// The controller writes the pin into the admission.
	w := specs["g"]
	adm := *w.Admission
	adm.Topology = pin
	w.Admission = &adm
	w.Booking.State = BookingProvisioned
	mustWL(t, e, w)
	if err := checkInvariants(e); err != nil {
		t.Fatal(err)
	}
	if got := e.topo.pools["big"].reserved; got != 0 {
		t.Fatalf("pool big reserves %d nodes once the gang holds big-1, want 0", got)
	}
	if got := e.workloads[key("g")].placed.shares; len(got) != 1 || got[0].node != "big-1" {
		t.Fatalf("g reserves %+v, want big-1", got)
	}
	// Another gang cannot be promised big-1.
	mustWL(t, e, gang("h", 1, 4, TopologyRequired, hostKey))
	res = cycle(t, e)
	if len(res.Admitted) != 1 || slices.Contains(res.Admitted[0].Admission.Topology.Domain, "big-1") {
		t.Fatalf("%s: h must not be placed on big-1", fmtResult(res))
	}
}

// TestHostGangNodeNeverJoins: a booking whose node never joins fails when it
// expires, as any booking that expires before its gang started.
func TestHostGangNodeNeverJoins(t *testing.T) {
	e := provEngine(t, ProvisionIfNeeded, nil, hostPool("big", "r1", 8, 2))
	g := gang("g", 2, 4, TopologyRequired, hostKey)
	specs := specMap(g)
	mustWL(t, e, g)
	confirm(t, e, specs, cycle(t, e))
	e.ReportBooking(key("g"), BookingReport{Attempt: 1, Answer: AnswerProvisioned})
	if res := e.Cycle(t0.Add(time.Minute)); len(res.Bookings) != 0 {
		t.Fatalf("%s: started without a node", fmtResult(res))
	}
	e.ReportBooking(key("g"), BookingReport{Attempt: 1, Answer: AnswerExpired})
	res := e.Cycle(t0.Add(11 * time.Minute))
	if len(res.Bookings) != 1 || res.Bookings[0].Action != BookingRetry || res.Bookings[0].State != BookingExpired {
		t.Fatalf("%s: want the attempt failed as expired", fmtResult(res))
	}
	if fd := res.Bookings[0].FailedDomains; len(fd) != 1 || !fd[0].AwaitsNode() {
		t.Fatalf("failed domains %+v, want the new node's domain", fd)
	}
}

// TestWaitOnBookingFlavorMarked: a gang waiting for capacity on a flavor
// that books it is marked so (the autoscaler is not asked, and the caller
// says why); one waiting for the nodes of a flavor that never books is not.
func TestWaitOnBookingFlavorMarked(t *testing.T) {
	for _, tc := range []struct {
		mode ProvisioningMode
		want bool
	}{{ProvisionIfNeeded, true}, {ProvisionNever, false}} {
		e := provEngine(t, tc.mode, []Node{busyNode("n1", 0)}, withAvail(hostPool("big", "r1", 8, 1), 0))
		mustWL(t, e, gang("g", 2, 4, TopologyRequired, hostKey))
		p, _ := pendingReason(cycle(t, e), "g")
		if p.Reason != TopologyUnavailable || p.BookingFlavor != tc.want {
			t.Errorf("%s: pending %+v, want TopologyUnavailable marked %t", tc.mode, p, tc.want)
		}
	}
}
