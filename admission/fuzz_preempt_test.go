package admission

import (
	"fmt"
	"testing"
)

// FuzzPreemptTopology drives preemption by gangs that need capacity: queues
// that preempt within themselves, reclaim lent quota or share fairly in a
// cohort, and three waves of gangs — low-priority training that fills the
// capacity and borrows, then higher-priority serving replicas bound to a
// rack, a host or a zone, then a mix — each wave cycled to a fixed point with
// every decision applied at once (converge). Checked besides FuzzConvergence's
// checks (which converge runs for both): every preemptor is admitted in the
// cycle after its victims are evicted, with the flavors and in the domain it
// preempted for (never a preemption that freed quota but no domain); a victim
// preempts nothing before it is admitted again; no partial gang; no queue or
// cohort over its limits; a gang that requires a domain is admitted in one.
// It is a target of its own so that the other targets' inputs keep their
// meaning; its decisions are recorded in testdata/decisions/topopreempt.txt.
func FuzzPreemptTopology(f *testing.F) {
	f.Add([]byte("\x01\x02\x00\x01\x02\x00\x05\x04\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("\x00\x03\x01\x02\x02\x01\x02\x03\x04\x05\x06\x07\x08\x00\x00\x01\x02\x00\x05\x06\x00\x07"))
	f.Add([]byte("\x02\x01\x00\x00\x01\x01\x00\x02\x03\x00\x01\x02\x03\x04\x05\x06\x07"))
	f.Fuzz(func(t *testing.T, data []byte) { runPreemptTopology(fuzzSetupPreempt(t, data)) })
}

// fuzzSetupPreempt is the capacity of fuzzSetup with two to four queues that
// preempt, most of them in one cohort.
func fuzzSetupPreempt(t *testing.T, data []byte) *fuzzRun {
	s := newBytesource(data)
	opts := Options{FairSharing: s.n(2) == 0, StarvationSkips: 1 + s.n(3)}
	r := &fuzzRun{t: t, s: s, e: newEngine(t, opts), twin: newEngine(t, wholeCohort(opts)), now: t0,
		m: fuzzModel{specs: map[string]Workload{}, phase: map[string]wlPhase{}, adm: map[string]*Admission{}, bk: map[string]*Booking{}}}
	for i := range 2 + s.n(3) {
		cq := preemptCQ(s, fmt.Sprintf("q%d", i))
		r.both(func(e *Engine) error { return e.UpsertClusterQueue(cq) })
	}
	r.capacity()
	return r
}

// preemptCQ is a queue of GPUs in f0 (which has racks and hosts) and, for
// some, f1 (which books capacity), with a preemption policy that mostly
// preempts.
func preemptCQ(s *bytesource, name string) ClusterQueue {
	cq := ClusterQueue{Name: name, Cohort: []string{"c0", "c0", "c0", ""}[s.n(4)], FairShareWeight: []int64{500, 1000, 1000, 2000}[s.n(4)]}
	cq.QueueingStrategy = []QueueingStrategy{BestEffortFIFO, BestEffortFIFO, StrictFIFO}[s.n(3)]
	cq.Preemption = PreemptionPolicy{
		WithinClusterQueue:  []PreemptionMode{PreemptLowerPriority, PreemptLowerPriority, PreemptLowerOrNewerEqualPriority, PreemptNever}[s.n(4)],
		ReclaimWithinCohort: []PreemptionMode{PreemptAny, PreemptLowerPriority, PreemptNever}[s.n(3)],
		FairSharing:         []PreemptionMode{"", PreemptLowerPriority, PreemptAny, PreemptNever}[s.n(4)],
	}
	flavors := [][]string{{"f0"}, {"f0"}, {"f0", "f1"}, {"f1", "f0"}}[s.n(4)]
	g := ResourceGroup{CoveredResources: []ResourceName{gpu}}
	for _, f := range flavors {
		q := Quota{Nominal: int64(s.n(9)) * 1000}
		if cq.Cohort != "" && s.n(3) == 0 {
			q.BorrowingLimit = ptr(int64(s.n(5)) * 1000)
		}
		if cq.Cohort != "" && s.n(3) == 0 {
			q.LendingLimit = ptr(int64(s.n(9)) * 1000)
		}
		g.Flavors = append(g.Flavors, FlavorQuotas{Flavor: f, Resources: map[ResourceName]Quota{gpu: q}})
	}
	cq.ResourceGroups = []ResourceGroup{g}
	return cq
}

// preemptGang is a gang of 1-4 pods of half a GPU to two GPUs: with serving
// (a later wave), mostly bound to a rack or a host; otherwise to a zone or a
// rack, preferred or required, or to nothing.
func preemptGang(s *bytesource, name string, created int64, serving bool) Workload {
	w := Workload{Key: key(name), ClusterQueue: fmt.Sprintf("q%d", s.n(4)), Priority: int32(s.n(2)), CreationTime: created,
		LocalQueue: "lq"}
	reqs := []*TopologyRequest{nil, {Mode: TopologyRequired, Level: "zone"}, {Mode: TopologyRequired, Level: "rack"},
		{Mode: TopologyPreferred, Level: "rack"}, {Mode: TopologyRequired, Level: "host"}}
	if serving {
		reqs = []*TopologyRequest{{Mode: TopologyRequired, Level: "rack"}, {Mode: TopologyRequired, Level: "rack"},
			{Mode: TopologyRequired, Level: "host"}, {Mode: TopologyPreferred, Level: "host"}, nil}
	}
	w.Topology = reqs[s.n(len(reqs))]
	w.PodSets = []PodSet{{Name: "main", Count: int32(1 + s.n(4)), Requests: Resources{gpu: int64(1+s.n(4)) * 500}}}
	if s.n(4) == 0 {
		w.PodSets = append(w.PodSets, PodSet{Name: "head", Count: 1, Requests: Resources{gpu: 500}})
	}
	return w
}

// runPreemptTopology is one FuzzPreemptTopology input: training, then serving
// at higher priorities, then a mix, each wave to a fixed point.
func runPreemptTopology(r *fuzzRun) {
	for wave := range int32(3) {
		for range 4 + r.s.n(12) {
			r.clock++
			name := fmt.Sprintf("w%d", r.clock)
			w := preemptGang(r.s, name, r.clock, wave > 0)
			w.Priority += 2 * wave
			r.upsert(w)
			r.m.specs[name], r.m.phase[name] = w, phasePending
		}
		if r.converge(); r.stuck {
			return
		}
	}
}
