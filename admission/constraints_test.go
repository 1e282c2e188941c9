package admission

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

const productKey = "example.com/gpu.product"

// labelFilter admits nodes whose label key has value want, and prefers
// those whose label prefKey has value pref.
type labelFilter struct{ key, want, prefKey, pref string }

func (f labelFilter) Key() string { return f.key + "=" + f.want + "|" + f.prefKey + "=" + f.pref }
func (f labelFilter) Admits(_ string, labels map[string]string) bool {
	return f.key == "" || labels[f.key] == f.want
}
func (f labelFilter) AdmitsFlavor(labels map[string]string) bool {
	v, ok := labels[f.key]
	return f.key == "" || !ok || v == f.want
}
func (f labelFilter) Score(labels map[string]string) int64 {
	if f.prefKey != "" && labels[f.prefKey] == f.pref {
		return 10
	}
	return 0
}
func (f labelFilter) String() string {
	if f.key == "" {
		return "preferred " + f.prefKey + "=" + f.pref
	}
	return "nodeSelector " + f.key + "=" + f.want
}

// product labels n with a GPU product.
func product(n Node, p string) Node {
	n.Labels = maps.Clone(n.Labels)
	n.Labels[productKey] = p
	return n
}

func constrained(w Workload, f NodeFilter, apart ...string) Workload {
	w.PodSets[0].Nodes, w.PodSets[0].Apart = f, apart
	return w
}

func TestPodConstraintsPlacement(t *testing.T) {
	h200 := labelFilter{key: productKey, want: "H200"}
	// Rack r1 is tighter (one node) but has H100s; rack r2 has H200s.
	mixed := []Node{
		sized(product(rackNode("n1", "a", "r1", 8), "H100"), 8),
		sized(product(rackNode("n3", "a", "r2", 8), "H200"), 8), sized(product(rackNode("n4", "a", "r2", 8), "H200"), 8),
	}
	tests := []struct {
		name       string
		nodes      []Node
		pools      []Pool
		w          Workload
		wantDomain []string
		wantShares map[string]int64 // GPUs planned per node
		wantNew    map[string]int32
		wantReason PendingReason
		wantMsg    string
	}{
		{
			name: "a node selector keeps the gang off the tighter rack whose nodes it cannot use", nodes: mixed,
			w:          constrained(gang("g", 1, 8, TopologyRequired, rackKey), h200),
			wantDomain: []string{"a", "r2"}, wantShares: map[string]int64{"n3": 8000},
		},
		{
			name: "no rack with nodes the selector admits has room: the message says why", nodes: mixed,
			w:          constrained(gang("g", 3, 8, TopologyRequired, rackKey), h200),
			wantReason: ExceedsDomainCapacity, wantMsg: "on the nodes its pods' own constraints allow (pod set main: nodeSelector example.com/gpu.product=H200)",
		},
		{
			name: "a preferred product ranks the racks that can take the gang", nodes: mixed,
			w:          constrained(gang("g", 1, 8, TopologyRequired, rackKey), labelFilter{prefKey: productKey, pref: "H200"}),
			wantDomain: []string{"a", "r2"}, wantShares: map[string]int64{"n3": 8000},
		},
		{
			name:  "one pod per node spreads the gang where packing would not",
			nodes: []Node{sized(rackNode("n1", "a", "r1", 8), 8), rackNode("n3", "a", "r2", 8), rackNode("n4", "a", "r2", 8)},
			w:     constrained(gang("g", 2, 2, TopologyRequired, rackKey), nil, "main"),
			// r1 has room for both pods on n1, but they must not share it.
			wantDomain: []string{"a", "r2"}, wantShares: map[string]int64{"n3": 2000, "n4": 2000},
		},
		{
			name:       "one pod per node: a rack of fewer nodes than pods can never hold the gang",
			nodes:      []Node{sized(rackNode("n1", "a", "r1", 4), 4)},
			w:          constrained(gang("g", 2, 1, TopologyRequired, rackKey), nil, "main"),
			wantReason: ExceedsDomainCapacity, wantMsg: "pod set main: one pod per node",
		},
		{
			name: "a booking goes to the pool whose nodes the selector admits",
			pools: []Pool{rackPool("pool-r1", "r1"), func() Pool {
				p := rackPool("pool-r2", "r2")
				p.Labels[productKey] = "H200"
				return p
			}()},
			w:          constrained(gang("g", 2, 8, TopologyRequired, rackKey), h200),
			wantDomain: []string{"a", "r2"}, wantNew: map[string]int32{"pool-r2": 2},
		},
		{
			name:       "one pod per node books a new node per pod",
			pools:      []Pool{rackPool("pool-r1", "r1")},
			w:          constrained(gang("g", 3, 1, TopologyRequired, rackKey), nil, "main"),
			wantDomain: []string{"a", "r1"}, wantNew: map[string]int32{"pool-r1": 3},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := provEngine(t, ProvisionIfNeeded, tc.nodes, tc.pools...)
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
			if a.Topology == nil || !slices.Equal(a.Topology.Domain, tc.wantDomain) {
				t.Fatalf("topology %+v, want domain %v", a.Topology, tc.wantDomain)
			}
			if tc.wantNew != nil && (a.Provisioning == nil || !maps.Equal(a.Provisioning.NewNodes, tc.wantNew)) {
				t.Fatalf("provisioning %+v, want new nodes %v", a.Provisioning, tc.wantNew)
			}
			if tc.wantShares != nil {
				got := map[string]int64{}
				for _, s := range e.workloads[key("g")].placed.shares {
					for _, r := range s.amt {
						got[s.node] += r.amt
					}
				}
				if !maps.Equal(got, tc.wantShares) {
					t.Fatalf("planned %v, want %v", got, tc.wantShares)
				}
			}
		})
	}
}

// TestPodSetsKeptApart: two pod sets that must not share a node never do,
// either way round.
func TestPodSetsKeptApart(t *testing.T) {
	e := provEngine(t, ProvisionNever, []Node{
		sized(rackNode("n1", "a", "r1", 8), 8), sized(rackNode("n2", "a", "r1", 8), 8),
	})
	w := gang("g", 1, 2, TopologyRequired, rackKey)
	w.PodSets = append(w.PodSets, PodSet{Name: "workers", Count: 1, Requests: Resources{gpu: 2000}, Apart: []string{"main"}})
	mustWL(t, e, w)
	res := cycle(t, e)
	if len(res.Admitted) != 1 {
		t.Fatalf("%s", fmtResult(res))
	}
	if shares := e.workloads[key("g")].placed.shares; len(shares) != 2 {
		t.Fatalf("planned %+v, want the two pod sets on two nodes", shares)
	}
}

func TestPodConstraintsValidation(t *testing.T) {
	e := topoEngine(t)
	w := constrained(gang("g", 1, 8, TopologyRequired, rackKey), nil, "nope")
	err := e.UpsertWorkload(w)
	if err == nil || !strings.Contains(err.Error(), `apart names pod set "nope"`) {
		t.Fatalf("got %v, want an error naming the unknown pod set", err)
	}
	if _, ok := e.workloads[key("g")]; ok {
		t.Fatal("an invalid workload reached the engine")
	}
}

// TestPodConstraintChangeRequeues: a pending workload whose constraints
// change is evaluated again with them.
func TestPodConstraintChangeRequeues(t *testing.T) {
	e := topoEngine(t, product(rackNode("n1", "a", "r1", 8), "H100"))
	w := constrained(gang("g", 1, 8, TopologyRequired, rackKey), labelFilter{key: productKey, want: "H200"})
	mustWL(t, e, w)
	if res := cycle(t, e); len(res.Admitted) != 0 {
		t.Fatalf("admitted onto a node the selector rejects: %s", fmtResult(res))
	}
	mustWL(t, e, constrained(gang("g", 1, 8, TopologyRequired, rackKey), labelFilter{key: productKey, want: "H100"}))
	if res := cycle(t, e); len(res.Admitted) != 1 {
		t.Fatalf("not admitted after its selector changed: %s", fmtResult(res))
	}
}
