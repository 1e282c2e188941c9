package admission

import (
	"fmt"
	"hash"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// bytesource turns fuzz input into bounded choices. Once the input is used up it
// continues with a PRNG seeded from the input, so a short input still drives a long,
// rich scenario (coverage guidance works on the prefix).
type bytesource struct {
	b   []byte
	i   int
	rng *rand.Rand
}

func newBytesource(data []byte) *bytesource {
	h := fnv.New64a()
	h.Write(data)
	return &bytesource{b: data, rng: rand.New(rand.NewPCG(h.Sum64(), uint64(len(data))))}
}

func (s *bytesource) byte() byte {
	if s.i >= len(s.b) {
		return byte(s.rng.Uint32())
	}
	s.i++
	return s.b[s.i-1]
}

func (s *bytesource) n(n int) int { return int(s.byte()) % n }

var fuzzFlavors = []string{"f0", "f1", "f2"}

func fuzzCQ(s *bytesource, name string) ClusterQueue {
	cohorts := []string{"", "c0", "c0", "c1"}
	cq := ClusterQueue{Name: name, Cohort: cohorts[s.n(4)], FairShareWeight: []int64{0, 500, 1000, 1000, 3000}[s.n(5)]}
	cq.QueueingStrategy = []QueueingStrategy{BestEffortFIFO, StrictFIFO}[s.n(2)]
	cq.Preemption = PreemptionPolicy{
		WithinClusterQueue:  []PreemptionMode{PreemptNever, PreemptLowerPriority, PreemptLowerOrNewerEqualPriority, PreemptLowerPriority}[s.n(4)],
		ReclaimWithinCohort: []PreemptionMode{PreemptNever, PreemptLowerPriority, PreemptAny, PreemptAny}[s.n(4)],
		FairSharing:         []PreemptionMode{"", PreemptNever, PreemptLowerPriority, PreemptAny, PreemptAny}[s.n(5)],
	}
	first := s.n(3)
	g := ResourceGroup{CoveredResources: []ResourceName{gpu}}
	for i := range 1 + s.n(2) {
		q := Quota{Nominal: int64(s.n(9)) * 1000}
		if cq.Cohort != "" && s.n(2) == 0 {
			q.BorrowingLimit = ptr(int64(s.n(5)) * 1000)
		}
		if cq.Cohort != "" && s.n(2) == 0 {
			q.LendingLimit = ptr(int64(s.n(9)) * 1000)
		}
		g.Flavors = append(g.Flavors, FlavorQuotas{Flavor: fuzzFlavors[(first+i)%3], Resources: map[ResourceName]Quota{gpu: q}})
		if g.Flavors[i].Flavor == "f2" {
			// f2's nodes are all in zone w: closed to the pods that ask for zone z.
			g.Flavors[i].NodeLabels = map[string]string{"zone": "w"}
		}
	}
	cq.ResourceGroups = []ResourceGroup{g}
	if s.n(2) == 0 {
		cq.ResourceGroups = append(cq.ResourceGroups, ResourceGroup{CoveredResources: []ResourceName{cpu},
			Flavors: []FlavorQuotas{{Flavor: "cpu", Resources: map[ResourceName]Quota{cpu: {Nominal: int64(s.n(17)) * 1000}}}}})
	}
	return cq
}

func fuzzWorkload(s *bytesource, name string, created int64) Workload {
	// LocalQueue and weight derive from the creation time, not from fuzz bytes, so
	// that corpus entries keep their meaning.
	w := Workload{Key: key(name), ClusterQueue: fmt.Sprintf("q%d", s.n(5)), Priority: int32(s.n(4)), CreationTime: created,
		LocalQueue: fmt.Sprintf("lq%d", created%3), LocalQueueWeight: 1000 * (created % 2)}
	switch created % 5 {
	case 0:
		w.Topology = &TopologyRequest{Mode: TopologyRequired, Level: "rack"}
	case 1:
		w.Topology = &TopologyRequest{Mode: TopologyPreferred, Level: "rack"}
	case 2:
		w.Topology = &TopologyRequest{Mode: TopologyRequired, Level: "zone"}
	}
	for i := range 1 + s.n(2) {
		ps := PodSet{Name: fmt.Sprintf("ps%d", i), Count: int32(1 + s.n(4)), Requests: Resources{gpu: int64(s.n(4)) * 500}}
		if s.n(3) == 0 {
			ps.Requests[cpu] = int64(1+s.n(4)) * 1000
		}
		w.PodSets = append(w.PodSets, ps)
	}
	// The pods' own constraints, also from the creation time: nodes of zone
	// z only (flavor f1's nodes and its near pool), or one pod per node.
	switch created % 7 {
	case 3:
		w.PodSets[0].Nodes = labelFilter{key: "zone", want: "z"}
	case 5:
		w.PodSets[0].Apart = []string{w.PodSets[0].Name}
	}
	return w
}

// fuzzModel is the harness's view of every workload it upserted: the spec,
// and the admission and booking record the API server would hold for it.
type fuzzModel struct {
	specs map[string]Workload
	phase map[string]wlPhase
	adm   map[string]*Admission
	bk    map[string]*Booking
}

// fuzzRun drives two engines with the same operations (the twin with the old
// wake rule, wholeCohort) and checks, after every operation, the invariants,
// and after every cycle the documented guarantees.
type fuzzRun struct {
	t          *testing.T
	s          *bytesource
	e, twin    *Engine
	m          fuzzModel
	clock      int64
	now        time.Time
	quotaMoved bool
	// decisions, when set, receives every decision the engine makes (cycle
	// results and explanations), so that two versions of the engine can be
	// compared on the same inputs (decisions_test.go).
	decisions hash.Hash64
	// stuck says a convergence run found no fixed point: recorded as a
	// decision when decisions are recorded, a failure otherwise.
	stuck bool
	// taints: the capacity carries taints and workloads may tolerate them
	// (FuzzTaints); off, the inputs mean what they meant before taints.
	taints bool
	// hosts: the flavors' finest level is kubernetes.io/hostname and some
	// gangs must fit one node (FuzzHosts).
	hosts bool
	// onCycle, when set, sees every result of converge (for tests).
	onCycle func(Result)
}

// object is the workload name as the API server holds it.
func (r *fuzzRun) object(name string) Workload {
	w := r.m.specs[name]
	w.Admission, w.Booking = r.m.adm[name], r.m.bk[name]
	return w
}

func (r *fuzzRun) both(f func(e *Engine) error) {
	err1, err2 := f(r.e), f(r.twin)
	if (err1 == nil) != (err2 == nil) {
		r.t.Fatalf("engines disagree on error: %v vs %v", err1, err2)
	}
}

func (r *fuzzRun) upsert(w Workload) {
	r.both(func(e *Engine) error { return e.UpsertWorkload(w) })
}

func (r *fuzzRun) step() {
	s := r.s
	switch op := s.n(13); op {
	case 0, 1, 2:
		r.clock++
		name := fmt.Sprintf("w%d", s.n(40))
		if _, ok := r.m.specs[name]; ok && r.m.phase[name] != phasePending {
			return
		}
		w := r.onHosts(r.tolerate(fuzzWorkload(s, name, r.clock)))
		r.m.specs[name], r.m.phase[name] = w, phasePending
		delete(r.m.adm, name)
		if _, ok := r.e.workloads[key(name)]; !ok {
			delete(r.m.bk, name) // a new Workload: no history
		}
		r.upsert(r.object(name))
	case 3:
		name := r.pick()
		if name == "" {
			return
		}
		r.both(func(e *Engine) error { e.DeleteWorkload(key(name)); return nil })
		r.forget(name)
	case 4, 5, 6:
		r.cycle()
	case 7:
		name := r.pick()
		if name != "" && r.m.phase[name] == phaseAdmitted {
			r.evicted(name)
		}
	case 11, 12:
		r.report()
	case 8:
		r.quotaMoved = true
		cq := fuzzCQ(s, fmt.Sprintf("q%d", s.n(5)))
		if s.n(4) == 0 {
			r.both(func(e *Engine) error { e.DeleteClusterQueue(cq.Name); return nil })
			return
		}
		cq.Stopped = s.n(5) == 0
		r.both(func(e *Engine) error { return e.UpsertClusterQueue(cq) })
	case 10:
		name := r.pick()
		ex1, ok1 := r.e.Explain(key(name))
		ex2, ok2 := r.twin.Explain(key(name))
		if ok1 != ok2 || !reflect.DeepEqual(ex1, ex2) {
			r.t.Fatalf("Explain differs between identical engines: %+v vs %+v", ex1, ex2)
		}
		r.record(ok1, ex1)
		_, held := r.e.Held(key(name)) // in no queue: nothing to explain
		if ok1 != (r.m.phase[name] == phasePending && name != "" && !held) {
			r.t.Fatalf("Explain(%s) ok=%v in phase %d", name, ok1, r.m.phase[name])
		}
	case 9:
		name := r.pick()
		if name != "" && r.m.phase[name] == phasePending {
			w := r.m.specs[name]
			w.Priority = int32(s.n(4))
			r.m.specs[name] = w
			r.upsert(r.object(name))
		}
	}
}

func (r *fuzzRun) pick() string {
	names := slices.Sorted(maps.Keys(r.m.specs))
	if len(names) == 0 {
		return ""
	}
	return names[r.s.n(len(names))]
}

func (r *fuzzRun) cycle() {
	r.now = r.now.Add(time.Duration(r.s.n(4)) * time.Minute)
	before := snapshotUsage(r.e)
	reserved := reservedSnapshot(r.e)
	pools := poolSnapshot(r.e)
	marked := markedEvictions(r.e)
	res := r.e.Cycle(r.now)
	res2 := r.twin.Cycle(r.now)
	if !reflect.DeepEqual(res, res2) {
		r.t.Fatalf("same input, different output:\n%s\n%s", fmtResult(res), fmtResult(res2))
	}
	r.record(res)
	r.checkCycle(res, before)
	r.checkEvictions(res, marked)
	r.checkPlacements(res, reserved, pools)
	// Capacity changes between cycles: one node's free GPUs vary with the clock,
	// and the pool's nodes come and go.
	n := Node{Name: "f0-n0", Flavors: []string{"f0"}, Free: Resources{gpu: r.clock % 3 * 1000, cpu: 8000},
		Labels: map[string]string{"zone": "0", "rack": "0", "host": "0"}}
	r.both(func(e *Engine) error { return e.UpsertNode(n) })
	r.poolNode()
	for _, a := range res.Admitted {
		name := a.Key.Name
		switch r.s.n(4) {
		case 0:
			r.both(func(e *Engine) error { e.Rollback(a.Key); return nil })
			r.m.phase[name] = phasePending
		case 1: // not confirmed yet
		default:
			adm := a.Admission
			r.m.adm[name], r.m.bk[name] = &adm, reservedRecord(r.m.bk[name], adm)
			if adm.Provisioning == nil {
				r.m.bk[name] = nil // admitted on existing capacity: the record is cleared
			}
			r.upsert(r.object(name))
			r.m.phase[name] = phaseAdmitted
		}
	}
	for _, p := range res.Preemptions {
		name := p.Victim.Name
		if r.s.n(4) == 0 {
			r.both(func(e *Engine) error { e.Rollback(p.Victim); return nil })
			continue
		}
		if r.m.phase[name] == phaseAdmitted {
			r.evicted(name)
		}
	}
	r.applyBookings(res)
	r.applyEvictions(res)
}

// checkCycle checks the guarantees of one cycle's result.
func (r *fuzzRun) checkCycle(res Result, before usageSnapshot) {
	for _, a := range res.Admitted {
		name := a.Key.Name
		if r.m.phase[name] != phasePending {
			r.t.Fatalf("%s admitted while in phase %d", name, r.m.phase[name])
		}
		r.m.phase[name] = phaseAssumed
		checkGang(r.t, r.m.specs[name], a.Admission)
	}
	for _, p := range res.Preemptions {
		if r.m.phase[p.Victim.Name] == phasePending {
			r.t.Fatalf("pending %s chosen as victim", p.Victim.Name)
		}
	}
	seen := map[WorkloadKey]bool{}
	for _, p := range res.Pending {
		if seen[p.Key] {
			r.t.Fatalf("%s reported twice in one cycle", p.Key)
		}
		seen[p.Key] = true
	}
	after := snapshotUsage(r.e)
	for _, v := range limitViolationsFR(r.e) {
		if after[v] > before[v] || (!r.quotaMoved && after[v] > 0) {
			r.t.Fatalf("limit exceeded by this cycle: %+v (before %d, after %d)", v, before[v], after[v])
		}
	}
}

func checkGang(t *testing.T, w Workload, a Admission) {
	if a.ClusterQueue != w.ClusterQueue || len(a.PodSets) != len(w.PodSets) {
		t.Fatalf("%s: partial or misdirected admission %+v", w.Key, a)
	}
	for i, ps := range w.PodSets {
		got := a.PodSets[i]
		if got.Name != ps.Name || got.Count != ps.Count {
			t.Fatalf("%s: pod set %d admitted as %+v", w.Key, i, got)
		}
		for res, q := range ps.Requests {
			if q > 0 && got.Flavors[res] == "" {
				t.Fatalf("%s: pod set %s has no flavor for %s", w.Key, ps.Name, res)
			}
		}
	}
}

// checkModel checks that nothing vanished: every workload the harness knows is in the
// engine in the phase the harness expects.
func (r *fuzzRun) checkModel() {
	if err := checkInvariants(r.e); err != nil {
		r.t.Fatal(err)
	}
	held := r.checkHeld()
	if len(r.e.workloads) != len(r.m.specs)-held {
		r.t.Fatalf("engine has %d workloads, harness %d of which %d held", len(r.e.workloads), len(r.m.specs), held)
	}
	for name, ph := range r.m.phase {
		if _, isHeld := r.e.Held(key(name)); isHeld {
			continue
		}
		w, ok := r.e.workloads[key(name)]
		if !ok {
			r.t.Fatalf("%s vanished", name)
		}
		if w.phase != ph {
			r.t.Fatalf("%s in phase %d, harness expects %d", name, w.phase, ph)
		}
	}
}

// wholeCohort is opts with the rule the engine had before it passed over
// cohort members a release cannot help: the twin of every fuzz run uses it,
// so that each run also proves that both rules decide the same.
func wholeCohort(opts Options) Options {
	opts.wakeWholeCohort = true
	return opts
}

func fuzzSetup(t *testing.T, data []byte) *fuzzRun {
	s := newBytesource(data)
	mode := s.n(4) // 0: no fair sharing; 1: between ClusterQueues; 2, 3: also between LocalQueues
	opts := Options{FairSharing: mode != 0, LocalQueueFairSharing: mode >= 2, StarvationSkips: 1 + s.n(3)}
	r := &fuzzRun{t: t, s: s, e: newEngine(t, opts), twin: newEngine(t, wholeCohort(opts)), now: t0,
		m: fuzzModel{specs: map[string]Workload{}, phase: map[string]wlPhase{}, adm: map[string]*Admission{}, bk: map[string]*Booking{}}}
	for i := range 1 + s.n(5) {
		cq := fuzzCQ(s, fmt.Sprintf("q%d", i))
		r.both(func(e *Engine) error { return e.UpsertClusterQueue(cq) })
	}
	r.capacity()
	return r
}

// capacity feeds the fuzz harness's flavors, pools and nodes.
func (r *fuzzRun) capacity() {
	// Topology (not from fuzz bytes, so corpus entries keep their meaning): f0
	// has two zones of two racks of two 2-GPU nodes, f1 one rack of two 4-GPU
	// nodes, f2 no levels (a topology request there is UnknownTopologyLevel).
	// f1 books capacity when it lacks some, from a pool of two more 4-GPU
	// nodes in its rack and one in another zone; its bookings fail after 3
	// minutes without capacity or 5 without an answer, at most twice in a row.
	for _, f := range []Flavor{
		{Name: "f0", Levels: []string{"zone", "rack", "host"}},
		{Name: "f1", Levels: []string{"zone", "rack", "host"}, Provisioning: ProvisioningPolicy{Mode: ProvisionIfNeeded,
			MaxAttempts: 2, Backoff: time.Minute, CapacityNotFoundTimeout: 3 * time.Minute, AnswerTimeout: 5 * time.Minute}},
	} {
		r.both(func(e *Engine) error { return e.UpsertFlavor(f) })
	}
	for _, p := range []Pool{
		{Name: "f1-pool", Flavor: "f1", Available: 2, NodeCapacity: Resources{gpu: 4000, cpu: 8000}, Labels: map[string]string{"zone": "z", "rack": "r"}},
		{Name: "f1-far", Flavor: "f1", Available: 1, NodeCapacity: Resources{gpu: 4000, cpu: 8000}, Labels: map[string]string{"zone": "y", "rack": "q"}},
	} {
		r.both(func(e *Engine) error { return e.UpsertPool(p) })
	}
	for i := range 8 {
		n := Node{Name: fmt.Sprintf("f0-n%d", i), Flavors: []string{"f0"}, Free: Resources{gpu: 2000, cpu: 8000},
			Labels: map[string]string{"zone": fmt.Sprint(i / 4), "rack": fmt.Sprint(i / 2), "host": fmt.Sprint(i)}}
		r.both(func(e *Engine) error { return e.UpsertNode(n) })
	}
	for i := range 2 {
		n := Node{Name: fmt.Sprintf("f1-n%d", i), Flavors: []string{"f1"}, Free: Resources{gpu: 4000, cpu: 8000},
			Labels: map[string]string{"zone": "z", "rack": "r", "host": fmt.Sprint(i)}}
		r.both(func(e *Engine) error { return e.UpsertNode(n) })
	}
}

// FuzzEngine applies random operations (workloads, cycles, confirmations, rollbacks,
// evictions, queue changes) to two engines and checks invariants after each.
func FuzzEngine(f *testing.F) {
	f.Add([]byte("\x01\x03\x00\x01\x02\x00\x05\x04\x00\x01\x00\x00\x00\x00\x00\x04\x04\x04"))
	f.Add([]byte("\x03\x04\x01\x02\x02\x01\x02\x03\x04\x05\x06\x07\x08\x09\x00\x01\x02\x04\x05\x06\x04\x07\x04"))
	f.Fuzz(func(t *testing.T, data []byte) { runEngine(fuzzSetup(t, data)) })
}

// runEngine is one FuzzEngine input: 300 random operations, then a cycle.
func runEngine(r *fuzzRun) {
	for range 300 {
		r.step()
		r.checkModel()
	}
	r.cycle()
	r.checkModel()
}

// reservedSnapshot copies every node's reserved capacity.
func reservedSnapshot(e *Engine) map[string]vec {
	out := map[string]vec{}
	for name, n := range e.topo.nodes {
		out[name] = slices.Clone(n.reserved)
	}
	return out
}

// checkPlacements: a gang that requires a domain is admitted into one of that
// level, and no node got more reserved by the cycle than it has free.
func (r *fuzzRun) checkPlacements(res Result, before map[string]vec, pools map[string]int32) {
	for _, a := range res.Admitted {
		w := r.m.specs[a.Key.Name]
		if w.Topology == nil || w.Topology.Mode != TopologyRequired {
			continue
		}
		if t := a.Admission.Topology; t == nil || t.Level != w.Topology.Level || len(t.Domain) != len(t.Levels) {
			r.t.Fatalf("%s requires a %s domain, admitted with %+v", a.Key, w.Topology.Level, t)
		}
	}
	r.checkConstraints(res)
	r.checkTaints(res)
	r.checkHosts(res)
	// The cycle's admissions reserve only what is free. (A provisioned gang the
	// cycle re-planned onto existing nodes may be charged beyond: the engine
	// counts pods that fit nowhere on the domain's first node.)
	admitted := map[string]map[int32]int64{}
	for _, a := range res.Admitted {
		if w := r.e.workloads[a.Key]; w.placed != nil {
			for _, sh := range w.placed.shares {
				if admitted[sh.node] == nil {
					admitted[sh.node] = map[int32]int64{}
				}
				for _, x := range sh.amt {
					admitted[sh.node][x.res] += x.amt
				}
			}
		}
	}
	for name, byRes := range admitted {
		n := r.e.topo.nodes[name]
		for res, amt := range byRes {
			if amt > 0 && n.reserved.at(res) > n.free.at(res) && before[name].at(res)+amt > n.free.at(res) {
				r.t.Fatalf("node %s: cycle's admissions reserved %d of resource %d on top of %d, free %d", name, amt, res, before[name].at(res), n.free.at(res))
			}
		}
	}
	for name, p := range r.e.topo.pools {
		if p.reserved > pools[name] && p.reserved > p.avail {
			r.t.Fatalf("pool %s: cycle reserved %d new nodes, %d available", name, p.reserved, p.avail)
		}
	}
}

// poolSnapshot copies every pool's reserved nodes.
func poolSnapshot(e *Engine) map[string]int32 {
	out := map[string]int32{}
	for name, p := range e.topo.pools {
		out[name] = p.reserved
	}
	return out
}

// checkConstraints: the cycle's placements put pods only on nodes their pod
// sets admit, and one pod per node where the gang asks for it.
func (r *fuzzRun) checkConstraints(res Result) {
	for _, a := range res.Admitted {
		w := r.e.workloads[a.Key]
		c := r.e.queues.cqs[a.Admission.ClusterQueue]
		for i, psa := range a.Admission.PodSets {
			for _, g := range c.groups {
				for _, fs := range g.flavors {
					if slices.Contains(slices.Collect(maps.Values(psa.Flavors)), fs.name) && !fs.nodes.admits(&w.podSets[i]) {
						r.t.Fatalf("%s: pod set %s admitted on flavor %s, whose node labels its pods rule out", a.Key, psa.Name, fs.name)
					}
				}
			}
		}
		if w.placed == nil {
			continue
		}
		tf := r.e.topo.flavorTopo[w.placed.assign.Flavor]
		for _, sh := range w.placed.shares {
			n := r.e.topo.nodes[sh.node]
			if n == nil || !w.admitsAny(tf, n) {
				r.t.Fatalf("%s: planned on node %s, which none of its pod sets admits", a.Key, sh.node)
			}
			ps := w.podSets[0]
			if len(w.podSets) == 1 && slices.Contains(ps.apart, 0) {
				for _, x := range sh.amt {
					if x.amt > ps.reqAmt(x.res) {
						r.t.Fatalf("%s: one pod per node, planned %d of resource %d on node %s", a.Key, x.amt, x.res, sh.node)
					}
				}
			}
		}
	}
}

// reqAmt is one pod's request of resource r.
func (ps *podSetSpec) reqAmt(r int32) int64 {
	for _, x := range ps.req {
		if x.res == r {
			return x.amt
		}
	}
	return 0
}
