package admission

import (
	"testing"
)

// Taints in the fuzz harness. They are an opt-in layer over fuzzSetup, so
// that the inputs of the other targets keep their meaning and their
// recorded decisions: rack 1 of f0 (nodes f0-n2 and f0-n3) is reserved
// (NoSchedule), f0-n7 prefers no pods (PreferNoSchedule, which excludes
// nothing), and f1's far pool creates nodes that evict what does not
// tolerate them (NoExecute). Which workloads tolerate what derives from
// the creation time, not from fuzz bytes.

var (
	fuzzReserved = Taint{Key: "reserved", Value: "true", Effect: TaintNoSchedule}
	fuzzFar      = Taint{Key: "far", Effect: TaintNoExecute}
)

// fuzzSetupTainted is fuzzSetup with taints on part of the capacity.
func fuzzSetupTainted(t *testing.T, data []byte) *fuzzRun {
	r := fuzzSetup(t, data)
	r.taints = true
	for _, name := range []string{"f0-n2", "f0-n3", "f0-n7"} {
		tn := r.e.topo.nodes[name]
		n := Node{Name: name, Flavors: []string{"f0"}, Labels: tn.labels, Free: Resources{gpu: 2000, cpu: 8000},
			Taints: []Taint{fuzzReserved}}
		if name == "f0-n7" {
			n.Taints = []Taint{{Key: "soft", Effect: TaintPreferNoSchedule}}
		}
		r.both(func(e *Engine) error { return e.UpsertNode(n) })
	}
	far := Pool{Name: "f1-far", Flavor: "f1", Available: 1, NodeCapacity: Resources{gpu: 4000, cpu: 8000},
		Labels: map[string]string{"zone": "y", "rack": "q"}, Taints: []Taint{fuzzFar}}
	r.both(func(e *Engine) error { return e.UpsertPool(far) })
	return r
}

// tolerate gives w's first pod set tolerations, with taints on: none, the
// reserved rack's (Equal), any taint of key far (Exists), or every taint.
func (r *fuzzRun) tolerate(w Workload) Workload {
	if !r.taints {
		return w
	}
	switch w.CreationTime % 4 {
	case 1:
		w.PodSets[0].Tolerations = []Toleration{{Key: "reserved", Operator: TolerationEqual, Value: "true", Effect: TaintNoSchedule}}
	case 2:
		w.PodSets[0].Tolerations = []Toleration{{Key: "far", Operator: TolerationExists}}
	case 3:
		w.PodSets[0].Tolerations = []Toleration{{Operator: TolerationExists}}
	}
	return w
}

// checkTaints: the cycle's placements put no pod on a node, and book no node
// of a pool, whose taints its pod sets do not tolerate.
func (r *fuzzRun) checkTaints(res Result) {
	for _, a := range res.Admitted {
		w := r.e.workloads[a.Key]
		if w.placed == nil {
			continue
		}
		tf := r.e.topo.flavorTopo[w.placed.assign.Flavor]
		for _, sh := range w.placed.shares {
			if n := r.e.topo.nodes[sh.node]; n != nil && !w.admitsAny(tf, n) {
				r.t.Fatalf("%s: planned on node %s, whose taints %v none of its pod sets tolerates", a.Key, sh.node, n.taints)
			}
		}
		for pool := range w.placed.newNodes {
			if p := r.e.topo.pools[pool]; p != nil && !w.admitsAnyPool(r.e.topo.flavorTopo[p.flavor], p) {
				r.t.Fatalf("%s: booked nodes of pool %s, whose taints %v none of its pod sets tolerates", a.Key, pool, p.taints)
			}
		}
	}
}

// FuzzTaints is FuzzEngine on tainted capacity with tolerating workloads.
func FuzzTaints(f *testing.F) {
	f.Add([]byte("\x01\x03\x00\x01\x02\x00\x05\x04\x00\x01\x00\x00\x00\x00\x00\x04\x04\x04"))
	f.Add([]byte("\x03\x01\x01\x02\x02\x01\x02\x03\x04\x05\x06\x07\x08\x00\x00\x01\x02\x00\x05\x06\x00\x07"))
	f.Fuzz(func(t *testing.T, data []byte) { runEngine(fuzzSetupTainted(t, data)) })
}
