package admission

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fourNodes: zone a, rack r1 (n1, n2) and rack r2 (n3, n4), 8 GPUs free on
// each node.
func fourNodes() []Node {
	return []Node{rackNode("n1", "a", "r1", 8), rackNode("n2", "a", "r1", 8), rackNode("n3", "a", "r2", 8), rackNode("n4", "a", "r2", 8)}
}

// placed is w admitted in cq and placed on host (or, host "", in rack) of
// zone a, admitted at at.
func placed(w Workload, cq, rack, host string, at int64) Workload {
	w = running(w, cq, at)
	w.Admission.Topology = &TopologyAssignment{Flavor: "h200", Level: rackKey, Levels: []string{zoneKey, rackKey}, Domain: []string{"a", rack}}
	if host != "" {
		w.Admission.Topology = &TopologyAssignment{Flavor: "h200", Level: hostKey, Levels: []string{zoneKey, rackKey, hostKey},
			Domain: []string{"a", rack, host}}
	}
	return w
}

// servingGang is a gang of queue serve that requires one domain of level.
func servingGang(name string, prio int32, pods int32, gpus int64, level string) Workload {
	w := job(name, "serve", prio, 100, pods, gpus)
	w.Topology = &TopologyRequest{Mode: TopologyRequired, Level: level}
	return w
}

// serveQueue is ClusterQueue serve: nominal GPUs of h200, preempting lower
// priorities within itself and reclaiming what it lends in cohort.
func serveQueue(cohort string, nominal int64) ClusterQueue {
	return newCQ("serve", cohort, []string{"h200"}, []int64{nominal},
		preempt(PreemptionPolicy{WithinClusterQueue: PreemptLowerPriority, ReclaimWithinCohort: PreemptAny}))
}

func hostDomain(rack, host string) []string { return []string{"a", rack, host} }

// TestDomainPreemption: a gang that needs a domain preempts only victims
// that free, besides the quota, one domain that then holds it — borrowers
// first, then lower priority, then the fewest GPUs, the domain whose victims
// evict the least — and none when no domain frees; once they are gone it is
// admitted in that domain, and nothing preempts again.
func TestDomainPreemption(t *testing.T) {
	for _, tc := range domainCases() {
		t.Run(tc.name, func(t *testing.T) { runDomainCase(t, tc) })
	}
}

// domainCase is a case of TestDomainPreemption.
type domainCase struct {
	name        string
	queues      []ClusterQueue
	mode        ProvisioningMode
	nodes       []Node // nil: fourNodes
	pools       []Pool
	running     []Workload
	p           Workload
	wantVictims []string // sorted
	wantReason  PendingReason
	wantMsg     string
	wantDomain  []string // where p is admitted once its victims are gone
	wantBooking bool
}

func domainCases() []domainCase {
	hiRack2 := placed(job("hi", "serve", 9, 3, 2, 8), "serve", "r2", "", 1)
	return []domainCase{
		{
			name:   "borrowers first: the queue that borrows gives back before the preemptor's own lower priorities",
			queues: []ClusterQueue{serveQueue("co", 32), newCQ("train", "co", []string{"h200"}, []int64{0})},
			running: []Workload{placed(job("t1", "train", 0, 1, 1, 8), "train", "r1", "n1", 10),
				placed(job("s1", "serve", 0, 2, 1, 8), "serve", "r1", "n2", 20), hiRack2},
			p: servingGang("p", 5, 1, 8, rackKey), wantVictims: []string{"t1"}, wantReason: WaitingForPreemption,
			wantDomain: []string{"a", "r1"},
		},
		{
			name:   "lower priority next",
			queues: []ClusterQueue{serveQueue("", 32)},
			running: []Workload{placed(job("a", "serve", 1, 1, 1, 8), "serve", "r1", "n1", 30),
				placed(job("b", "serve", 0, 2, 1, 8), "serve", "r1", "n2", 10), hiRack2},
			p: servingGang("p", 5, 1, 8, rackKey), wantVictims: []string{"b"}, wantReason: WaitingForPreemption,
			wantDomain: []string{"a", "r1"},
		},
		{
			// The quota planner would take the most recently admitted, big.
			name:   "then the fewest GPUs",
			queues: []ClusterQueue{serveQueue("", 28)},
			running: []Workload{placed(job("big", "serve", 0, 1, 1, 8), "serve", "r1", "n1", 30),
				placed(job("small", "serve", 0, 2, 1, 4), "serve", "r1", "n2", 10), hiRack2},
			p: servingGang("p", 5, 1, 4, rackKey), wantVictims: []string{"small"}, wantReason: WaitingForPreemption,
			wantDomain: []string{"a", "r1"},
		},
		{
			// Evicting s3 alone frees the quota, but leaves no rack of 16
			// GPUs: the quota planner's choice, a preemption for nothing.
			name:   "one domain: the rack whose victims evict the least",
			queues: []ClusterQueue{serveQueue("", 32)},
			running: []Workload{placed(job("s1", "serve", 0, 1, 1, 8), "serve", "r1", "n1", 10),
				placed(job("s2", "serve", 0, 2, 1, 8), "serve", "r2", "n3", 20), placed(job("s3", "serve", 0, 3, 1, 8), "serve", "r2", "n4", 30)},
			p: servingGang("p", 5, 2, 8, rackKey), wantVictims: []string{"s1"}, wantReason: WaitingForPreemption,
			wantDomain: []string{"a", "r1"},
		},
		{
			name:   "none when no domain frees: quota alone is not preempted for",
			queues: []ClusterQueue{serveQueue("", 32)},
			running: []Workload{placed(job("hi1", "serve", 9, 1, 1, 8), "serve", "r1", "n1", 1), placed(job("lo1", "serve", 0, 2, 1, 8), "serve", "r1", "n2", 2),
				placed(job("hi2", "serve", 9, 3, 1, 8), "serve", "r2", "n3", 3), placed(job("lo2", "serve", 0, 4, 1, 8), "serve", "r2", "n4", 4)},
			p: servingGang("p", 5, 2, 8, rackKey), wantReason: InsufficientQuota,
			wantMsg: "preemption could free the quota but not any example.com/rack domain of flavor h200 for all 2 pods, so it preempts nothing",
		},
		{
			// Evicting x (4 GPUs, the smaller) first does not free a node
			// for a pod of 8; y does, and then x is not needed.
			name:   "a minimal set: victims that turn out unnecessary are put back",
			queues: []ClusterQueue{serveQueue("", 32)},
			running: []Workload{placed(job("x", "serve", 0, 1, 1, 4), "serve", "r1", "n1", 10), placed(job("h", "serve", 9, 2, 1, 4), "serve", "r1", "n1", 1),
				placed(job("y", "serve", 0, 3, 1, 8), "serve", "r1", "n2", 5), hiRack2},
			p: servingGang("p", 5, 1, 8, rackKey), wantVictims: []string{"y"}, wantReason: WaitingForPreemption,
			wantDomain: []string{"a", "r1"},
		},
		{
			// lo frees n2 whole; a and b together free n3, as many GPUs in
			// two victims.
			name:   "hostname level: the host whose victims evict the least, then the fewest victims",
			queues: []ClusterQueue{serveQueue("", 32)},
			running: []Workload{placed(job("hi1", "serve", 9, 1, 1, 8), "serve", "r1", "n1", 1), placed(job("lo", "serve", 0, 2, 1, 8), "serve", "r1", "n2", 2),
				placed(job("a", "serve", 0, 3, 1, 4), "serve", "r2", "n3", 3), placed(job("b", "serve", 0, 4, 1, 4), "serve", "r2", "n3", 4),
				placed(job("hi2", "serve", 9, 5, 1, 8), "serve", "r2", "n4", 5)},
			p: servingGang("p", 5, 1, 8, hostKey), wantVictims: []string{"lo"}, wantReason: WaitingForPreemption,
			wantDomain: hostDomain("r1", "n2"),
		},
		{
			// Within its nominal quota the queue has room; what it lacks is
			// a rack: lower priorities of its own give one back.
			name:   "quota fits but no domain: lower priorities of the queue free one",
			queues: []ClusterQueue{serveQueue("", 100)},
			running: []Workload{placed(job("lo1", "serve", 0, 1, 2, 8), "serve", "r1", "", 10),
				placed(job("lo2", "serve", 0, 2, 1, 8), "serve", "r2", "n3", 20), placed(job("hi", "serve", 9, 3, 1, 4), "serve", "r2", "n4", 1)},
			p: servingGang("p", 5, 1, 8, rackKey), wantVictims: []string{"lo2"}, wantReason: WaitingForPreemption,
			wantDomain: []string{"a", "r2"},
		},
		{
			// nt is not placed by berth (no topology): evicting it frees
			// quota, and no known capacity; rack r2 is free.
			name:   "within the queue, a lower-priority gang without topology frees the quota of a free rack",
			queues: []ClusterQueue{serveQueue("", 24)},
			nodes:  []Node{rackNode("n1", "a", "r1", 0), rackNode("n2", "a", "r1", 0), rackNode("n3", "a", "r2", 8), rackNode("n4", "a", "r2", 8)},
			running: []Workload{running(job("nt", "serve", 0, 1, 2, 8), "serve", 10),
				running(job("hint", "serve", 9, 2, 1, 8), "serve", 1)},
			p: servingGang("p", 5, 2, 8, rackKey), wantVictims: []string{"nt"}, wantReason: WaitingForPreemption,
			wantDomain: []string{"a", "r2"},
		},
		{
			name:   "a queue of the cohort within its nominal quota is no victim",
			queues: []ClusterQueue{serveQueue("co", 16), newCQ("train", "co", []string{"h200"}, []int64{16})},
			running: []Workload{placed(job("t1", "train", 0, 1, 2, 8), "train", "r1", "", 10),
				placed(job("s1", "serve", 9, 2, 2, 8), "serve", "r2", "", 20)},
			p: servingGang("p", 5, 1, 8, rackKey), wantReason: InsufficientQuota,
		},
		{
			name:   "a flavor that books: victims free a rack of existing capacity, nothing is booked",
			mode:   ProvisionIfNeeded,
			queues: []ClusterQueue{serveQueue("", 16)},
			nodes:  []Node{rackNode("n1", "a", "r1", 8), rackNode("n2", "a", "r1", 8)},
			pools:  []Pool{rackPool("pool-r2", "r2")},
			running: []Workload{placed(job("lo", "serve", 0, 1, 1, 8), "serve", "r1", "n1", 10),
				placed(job("hi", "serve", 9, 2, 1, 8), "serve", "r1", "n2", 1)},
			p: servingGang("p", 5, 1, 8, rackKey), wantVictims: []string{"lo"}, wantReason: WaitingForPreemption,
			wantDomain: []string{"a", "r1"},
		},
		{
			// Rack r1 is all high priority; nt frees quota, and rack r2's
			// pool can create the node.
			name:   "a flavor that books: victims free the quota, and the gang books a rack its pool can grow",
			mode:   ProvisionIfNeeded,
			queues: []ClusterQueue{serveQueue("", 24)},
			nodes:  []Node{rackNode("n1", "a", "r1", 8), rackNode("n2", "a", "r1", 8)},
			pools:  []Pool{withAvail(rackPool("pool-r2", "r2"), 1)},
			running: []Workload{placed(job("hi1", "serve", 9, 1, 1, 8), "serve", "r1", "n1", 1),
				placed(job("hi2", "serve", 9, 2, 1, 8), "serve", "r1", "n2", 2), running(job("nt", "serve", 0, 3, 1, 8), "serve", 10)},
			p: servingGang("p", 5, 1, 8, rackKey), wantVictims: []string{"nt"}, wantReason: WaitingForPreemption,
			wantDomain: []string{"a", "r2"}, wantBooking: true,
		},
		{
			name:   "a flavor that books: neither a freed rack nor a pool that can grow, no preemption",
			mode:   ProvisionIfNeeded,
			queues: []ClusterQueue{serveQueue("", 24)},
			nodes:  []Node{rackNode("n1", "a", "r1", 8), rackNode("n2", "a", "r1", 8)},
			pools:  []Pool{withAvail(rackPool("pool-r2", "r2"), 0)},
			running: []Workload{placed(job("hi1", "serve", 9, 1, 1, 8), "serve", "r1", "n1", 1),
				placed(job("hi2", "serve", 9, 2, 1, 8), "serve", "r1", "n2", 2), running(job("nt", "serve", 0, 3, 1, 8), "serve", 10)},
			p: servingGang("p", 5, 1, 8, rackKey), wantReason: InsufficientQuota, wantMsg: "preemption could free the quota but not",
		},
	}
}

// runDomainCase: p preempts the victims wanted (as Explain planned), waits
// for them, is admitted in the domain wanted once they are gone, and nothing
// preempts again.
func runDomainCase(t *testing.T, tc domainCase) {
	e := newEngine(t, Options{})
	mustCQ(t, e, tc.queues...)
	if err := e.UpsertFlavor(Flavor{Name: "h200", Levels: []string{zoneKey, rackKey, hostKey}, Provisioning: ProvisioningPolicy{Mode: tc.mode}}); err != nil {
		t.Fatal(err)
	}
	nodes := tc.nodes
	if nodes == nil {
		nodes = fourNodes()
	}
	for _, n := range nodes {
		if err := e.UpsertNode(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range tc.pools {
		if err := e.UpsertPool(p); err != nil {
			t.Fatal(err)
		}
	}
	mustWL(t, e, tc.running...)
	mustWL(t, e, tc.p)
	specs := specMap(append(slices.Clone(tc.running), tc.p)...)

	ex, _ := e.Explain(key("p")) // the plan, before the cycle carries it out
	res := cycle(t, e)
	got := victimNames(res)
	slices.Sort(got)
	if !slices.Equal(got, tc.wantVictims) {
		t.Fatalf("victims %v, want %v (%s)", got, tc.wantVictims, fmtResult(res))
	}
	var planned []string
	for _, v := range ex.Preemption.Victims {
		planned = append(planned, v.Victim.Name)
	}
	slices.Sort(planned)
	if !slices.Equal(planned, got) || ex.Preemption.Possible != (len(got) > 0) {
		t.Fatalf("Explain planned %v (%s), the cycle preempted %v", planned, ex.Preemption.Message, got)
	}
	p, _ := pendingReason(res, "p")
	if p.Reason != tc.wantReason || !strings.Contains(p.Message, tc.wantMsg) {
		t.Fatalf("p: %s %q, want %s containing %q", p.Reason, p.Message, tc.wantReason, tc.wantMsg)
	}
	if len(got) == 0 {
		if ex.Message != p.Message {
			t.Fatalf("Explain says %q, the cycle %q", ex.Message, p.Message)
		}
		return
	}
	if !strings.Contains(p.Message, "is held for it") {
		t.Fatalf("p waits with %q: its domain should be named", p.Message)
	}

	// Its victims gone, p is admitted first, in the domain they freed.
	evict(t, e, specs, res)
	if ex, _ := e.Explain(key("p")); ex.Reason != "" {
		t.Fatalf("Explain before the cycle that admits p: %s %q", ex.Reason, ex.Message)
	}
	res = cycle(t, e)
	if names := admittedNames(res); len(names) == 0 || names[0] != "p" {
		t.Fatalf("victims gone, admitted %v, want p first (%s)", names, fmtResult(res))
	}
	a := res.Admitted[0].Admission
	if a.Topology == nil || !slices.Equal(a.Topology.Domain, tc.wantDomain) {
		t.Fatalf("p admitted in %+v, want domain %v", a.Topology, tc.wantDomain)
	}
	if (a.Provisioning != nil) != tc.wantBooking {
		t.Fatalf("p books %+v, want a booking: %v", a.Provisioning, tc.wantBooking)
	}
	confirm(t, e, specs, res)

	// No loop: the victims, queued again, preempt nothing.
	for range 3 {
		res = cycle(t, e)
		if len(res.Preemptions) > 0 {
			t.Fatalf("preempted again: %s", fmtResult(res))
		}
		confirm(t, e, specs, res)
	}
}

// TestServingReclaimsARack is the case the rule is for: training borrows the
// serving queue's idle quota and fills both racks; a serving replica that
// must run in one rack takes its quota back there. The evicted training gang
// waits (it preempts nothing), the rack it ran in stays the replica's, and
// once the replica is done the training gang runs again.
func TestServingReclaimsARack(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, serveQueue("gpus", 16), newCQ("train", "gpus", []string{"h200"}, []int64{16}))
	if err := e.UpsertFlavor(Flavor{Name: "h200", Levels: []string{zoneKey, rackKey, hostKey}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range fourNodes() {
		if err := e.UpsertNode(n); err != nil {
			t.Fatal(err)
		}
	}
	t1, t2 := job("t1", "train", 0, 1, 2, 8), job("t2", "train", 0, 2, 2, 8)
	for _, w := range []*Workload{&t1, &t2} {
		w.Topology = &TopologyRequest{Mode: TopologyRequired, Level: rackKey}
	}
	specs := specMap(t1, t2)
	mustWL(t, e, t1, t2)
	res := cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{"t1", "t2"}) {
		t.Fatalf("training admitted %v", got)
	}
	confirm(t, e, specs, res)
	racks := map[string][]string{}
	for _, a := range res.Admitted {
		racks[a.Key.Name] = a.Admission.Topology.Domain
	}

	replica := servingGang("replica", 10, 2, 8, rackKey)
	specs["replica"] = replica
	mustWL(t, e, replica)
	res = cycle(t, e)
	if len(res.Preemptions) != 1 || res.Preemptions[0].Reason != InCohortReclamation {
		t.Fatalf("want one reclamation, got %s", fmtResult(res))
	}
	victim := res.Preemptions[0].Victim.Name
	if !strings.Contains(res.Preemptions[0].Message, "to free capacity in example.com/rack="+racks[victim][1]) {
		t.Fatalf("victim's message %q does not name its rack", res.Preemptions[0].Message)
	}
	evict(t, e, specs, res)
	res = cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{"replica"}) || !slices.Equal(res.Admitted[0].Admission.Topology.Domain, racks[victim]) {
		t.Fatalf("replica not admitted in %v: %s", racks[victim], fmtResult(res))
	}
	confirm(t, e, specs, res)
	for range 5 {
		res = cycle(t, e)
		if len(res.Preemptions) > 0 || len(res.Admitted) > 0 {
			t.Fatalf("the victim came back or preempted: %s", fmtResult(res))
		}
	}
	if ex, _ := e.Explain(key(victim)); ex.Reason != InsufficientQuota ||
		ex.Preemption.Message != "it was evicted by a preemption and preempts nothing until it has been admitted again" {
		t.Fatalf("victim: %s %q; preemption: %q", ex.Reason, ex.Message, ex.Preemption.Message)
	}
	e.DeleteWorkload(key("replica"))
	res = cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{victim}) {
		t.Fatalf("replica done, admitted %v, want %s", got, victim)
	}
}

// TestPreemptorHoldsItsDomain: while a preemptor waits for its victims, the
// free capacity its plan counts on and, as each victim goes, the victim's
// capacity are held for it — neither a gang that arrives meanwhile nor the
// victim queued again takes the domain — and it is admitted there, first,
// once the last victim is gone.
func TestPreemptorHoldsItsDomain(t *testing.T) {
	e := newEngine(t, Options{})
	mustCQ(t, e, serveQueue("", 16), newCQ("other", "", []string{"h200"}, []int64{32}))
	if err := e.UpsertFlavor(Flavor{Name: "h200", Levels: []string{zoneKey, rackKey, hostKey}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range fourNodes() {
		if err := e.UpsertNode(n); err != nil {
			t.Fatal(err)
		}
	}
	// r1: v1 (8 GPUs on n1) and 4 free GPUs on n2 beside hi; r2 full. The
	// queue's 16 GPUs are used: p needs v1's and v2's quota.
	v1 := placed(job("v1", "serve", 0, 1, 1, 8), "serve", "r1", "n1", 10)
	v2 := placed(job("v2", "serve", 0, 2, 1, 4), "serve", "r2", "n3", 20)
	hi := placed(job("hi", "serve", 9, 3, 1, 4), "serve", "r1", "n2", 1)
	full := placed(job("full", "other", 9, 4, 3, 4), "other", "r2", "", 1)
	p := servingGang("p", 5, 3, 4, rackKey) // 12 GPUs in one rack
	specs := specMap(v1, v2, hi, full, p)
	mustWL(t, e, v1, v2, hi, full, p)
	res := cycle(t, e)
	if got := victimNames(res); !eqStrings(got, []string{"v2", "v1"}) { // the fewest GPUs first
		t.Fatalf("victims %v (%s)", got, fmtResult(res))
	}
	// v2 frees quota only (r2 stays full); r1 is the domain: n1 once v1
	// goes, and n2's 4 free GPUs, held now.
	if n2 := e.topo.nodes["n2"]; n2.free.at(e.names.resIDs[gpu])-n2.reserved.at(e.names.resIDs[gpu]) != 0 {
		t.Fatalf("n2 has %d GPUs left: its free capacity should be held for p", n2.free.at(e.names.resIDs[gpu])-n2.reserved.at(e.names.resIDs[gpu]))
	}
	w := specs["v1"]
	w.Admission = nil
	mustWL(t, e, w) // v1 is gone, v2 not yet
	thief := job("thief", "other", 9, 5, 1, 4)
	thief.Topology = &TopologyRequest{Mode: TopologyRequired, Level: rackKey}
	specs["thief"] = thief
	mustWL(t, e, thief)
	res = cycle(t, e)
	if len(res.Admitted) != 0 {
		t.Fatalf("admitted %v while p waits for v2 (r1 is held for it)", admittedNames(res))
	}
	w = specs["v2"]
	w.Admission = nil
	mustWL(t, e, w)
	res = cycle(t, e)
	if got := admittedNames(res); len(got) == 0 || got[0] != "p" || !slices.Equal(res.Admitted[0].Admission.Topology.Domain, []string{"a", "r1"}) {
		t.Fatalf("admitted %v, want p first in rack r1 (%s)", got, fmtResult(res))
	}
	if err := checkInvariants(e); err != nil {
		t.Fatal(err)
	}
}

// TestPreemptionLoopSeed replays the input with which FuzzConvergence found
// the loop of a gang of a booking flavor preempting for quota alone (seed
// c205cd123dfa3188, also replayed as FuzzConvergence's corpus): gangs that
// need capacity now preempt there, and every preemptor is admitted in the
// domain it preempted for (converge checks it) until a fixed point.
func TestPreemptionLoopSeed(t *testing.T) {
	data := readSeed(t, "testdata/fuzz/FuzzConvergence/c205cd123dfa3188")
	r := fuzzSetup(t, data)
	domains := 0
	r.onCycle = func(res Result) {
		for _, p := range res.Preemptions {
			if w := r.e.workloads[p.Preemptor]; w != nil && w.hold != nil && w.hold.check {
				domains++
			}
		}
	}
	runConvergence(r)
	if r.stuck {
		t.Fatal("no fixed point")
	}
	t.Logf("%d preemptions for a domain", domains)
}

// readSeed reads the input of a fuzz corpus file.
func readSeed(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "[]byte(") {
		t.Fatalf("%s: not a corpus file of one []byte", path)
	}
	v, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(v)
}

// BenchmarkDomainPreemption measures one plan of a gang that must free a
// rack (Explain runs the cycle's planner and changes nothing): 64 racks of
// eight 8-GPU nodes, filled by 512 training gangs of 8 GPUs that borrow the
// serving queue's quota, and a serving replica of 16 GPUs that must run in
// one rack — every rack is a candidate domain, every gang a candidate victim.
func BenchmarkDomainPreemption(b *testing.B) {
	e := newEngine(b, DefaultOptions())
	mustCQ(b, e, serveQueue("gpus", 2048), newCQ("train", "gpus", []string{"h200"}, []int64{2048}))
	if err := e.UpsertFlavor(Flavor{Name: "h200", Levels: []string{zoneKey, rackKey, hostKey}}); err != nil {
		b.Fatal(err)
	}
	for r := range 64 {
		for n := range 8 {
			rack, host := fmt.Sprintf("r%02d", r), fmt.Sprintf("n%02d-%d", r, n)
			if err := e.UpsertNode(rackNode(host, "a", rack, 8)); err != nil {
				b.Fatal(err)
			}
			w := placed(job("t-"+host, "train", int32(n%3), int64(r*8+n), 1, 8), "train", rack, host, int64(r*8+n))
			mustWL(b, e, w)
		}
	}
	mustWL(b, e, servingGang("replica", 10, 2, 8, rackKey))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if ex, _ := e.Explain(key("replica")); !ex.Preemption.Possible || len(ex.Preemption.Victims) != 2 {
			b.Fatalf("plan: %+v", ex.Preemption)
		}
	}
}

// TestReservationLiftedWhenPreemptorDoesNotFit: a rack-bound replica that
// preempted reserves its queue's quota for itself while it waits; when its
// victims are gone but pods berth did not place took the rack meanwhile, it
// is not admitted, and the workloads it blocked are released then — they
// stayed blocked behind a head that reserved for victims it no longer had
// (found by the simulator's serving-reclaim scenario).
func TestReservationLiftedWhenPreemptorDoesNotFit(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, serveQueue("gpus", 17), newCQ("train", "gpus", []string{"h200"}, []int64{16}))
	if err := e.UpsertFlavor(Flavor{Name: "h200", Levels: []string{zoneKey, rackKey, hostKey}}); err != nil {
		t.Fatal(err)
	}
	nodes := append(fourNodes(), rackNode("n5", "a", "r3", 1))
	for _, n := range nodes {
		if err := e.UpsertNode(n); err != nil {
			t.Fatal(err)
		}
	}
	t1 := placed(job("t1", "train", 0, 1, 2, 8), "train", "r1", "", 10)
	t2 := placed(job("t2", "train", 0, 2, 2, 8), "train", "r2", "", 11)
	replica := servingGang("replica", 10, 2, 8, rackKey)
	small := job("small", "serve", 0, 200, 1, 1)
	specs := specMap(t1, t2, replica, small)
	mustWL(t, e, t1, t2, replica)
	first := cycle(t, e)
	if len(first.Preemptions) != 1 {
		t.Fatalf("want one reclamation, got %s", fmtResult(first))
	}
	victim := specs[first.Preemptions[0].Victim.Name]
	mustWL(t, e, small)
	if res := cycle(t, e); !slices.ContainsFunc(res.Pending, func(p PendingUpdate) bool { return p.Key == key("small") && p.Reason == ReservedForHead }) {
		t.Fatalf("small not reserved for the head: %s", fmtResult(res))
	}
	// The victim goes; pods berth did not place take its rack's nodes.
	evict(t, e, specs, first)
	for _, n := range nodes {
		if n.Labels[rackKey] == victim.Admission.Topology.Domain[1] {
			n.Free = Resources{gpu: 0}
			if err := e.UpsertNode(n); err != nil {
				t.Fatal(err)
			}
		}
	}
	var got []string
	for range 3 {
		res := cycle(t, e)
		got = append(got, admittedNames(res)...)
		confirm(t, e, specs, res)
		evict(t, e, specs, res)
	}
	if !slices.Contains(got, "small") {
		t.Fatalf("admitted %v, want small, released when the replica found its rack taken", got)
	}
}
