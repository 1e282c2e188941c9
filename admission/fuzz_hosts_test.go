package admission

import (
	"strings"
	"testing"
)

// Gangs that must fit one node in the fuzz harness: an opt-in layer over
// fuzzSetup, so that the inputs of the other targets keep their meaning and
// their recorded decisions. The flavors' finest level is
// kubernetes.io/hostname instead of "host", so that each node f1's pool can
// create is a hostname domain of its own; workloads created at a time of 3
// or 4 modulo 5 (which ask for no topology otherwise) are required, or
// prefer, to fit one node.

// fuzzSetupHosts is fuzzSetup with hostname levels and gangs that ask for
// them.
func fuzzSetupHosts(t *testing.T, data []byte) *fuzzRun {
	r := fuzzSetup(t, data)
	r.hosts = true
	for _, f := range []Flavor{
		{Name: "f0", Levels: []string{"zone", "rack", HostnameLevel}},
		{Name: "f1", Levels: []string{"zone", "rack", HostnameLevel}, Provisioning: r.e.topo.flavorTopo["f1"].policy},
	} {
		r.both(func(e *Engine) error { return e.UpsertFlavor(f) })
	}
	for _, name := range []string{"f0-n0", "f0-n1", "f0-n2", "f0-n3", "f0-n4", "f0-n5", "f0-n6", "f0-n7", "f1-n0", "f1-n1"} {
		tn := r.e.topo.nodes[name]
		labels := map[string]string{"zone": tn.labels["zone"], "rack": tn.labels["rack"], HostnameLevel: tn.labels["host"]}
		n := Node{Name: name, Flavors: tn.flavors, Labels: labels, Free: Resources{gpu: 2000, cpu: 8000}}
		if strings.HasPrefix(name, "f1-") {
			n.Free[gpu] = 4000
		}
		r.both(func(e *Engine) error { return e.UpsertNode(n) })
	}
	return r
}

// hostKey is the label key of the flavors' finest level.
func (r *fuzzRun) hostKey() string {
	if r.hosts {
		return HostnameLevel
	}
	return "host"
}

// onHosts makes w, with hosts on, a gang that must (or prefers to) fit one
// node, by its creation time.
func (r *fuzzRun) onHosts(w Workload) Workload {
	if !r.hosts {
		return w
	}
	switch w.CreationTime % 5 {
	case 3:
		w.Topology = &TopologyRequest{Mode: TopologyRequired, Level: HostnameLevel}
	case 4:
		w.Topology = &TopologyRequest{Mode: TopologyPreferred, Level: HostnameLevel}
	}
	return w
}

// checkHosts: a gang admitted at the hostname level that books capacity
// books one node of one pool, and one that books nothing names its node.
func (r *fuzzRun) checkHosts(res Result) {
	for _, a := range res.Admitted {
		t := a.Admission.Topology
		if t == nil || t.Level != HostnameLevel {
			continue
		}
		p := a.Admission.Provisioning
		var nodes int32
		if p != nil {
			for _, n := range p.NewNodes {
				nodes += n
			}
		}
		if t.AwaitsNode() != (nodes > 0) || nodes > 1 {
			r.t.Fatalf("%s at the hostname level, domain %q, plan %+v: want one new node exactly when the node is unnamed", a.Key, t.Domain, p)
		}
	}
	for _, d := range res.Bookings {
		if d.Topology != nil && (d.Action != BookingStart || d.Topology.AwaitsNode()) {
			r.t.Fatalf("booking decision %+v: a pin names a node, and only on a start", d)
		}
	}
}

// FuzzHosts is FuzzEngine with gangs that must fit one node.
func FuzzHosts(f *testing.F) {
	f.Add([]byte("\x01\x03\x00\x01\x02\x00\x05\x04\x00\x01\x00\x00\x00\x00\x00\x04\x04\x04"))
	f.Add([]byte("\x03\x04\x01\x02\x02\x01\x02\x03\x04\x05\x06\x07\x08\x09\x00\x01\x02\x04\x05\x06\x04\x07\x04"))
	f.Fuzz(func(t *testing.T, data []byte) { runEngine(fuzzSetupHosts(t, data)) })
}
