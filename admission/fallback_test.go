package admission

import (
	"strings"
	"testing"
)

// flavorNode is a node of flavor f in zone a, rack rack, with gpus free.
func flavorNode(name, f, rack string, gpus int64) Node {
	n := rackNode(name, "a", rack, gpus)
	n.Flavors = []string{f}
	return n
}

// TestTopologyFlavorFallback: a topology gang whose quota fits a flavor where no
// domain takes it tries the group's next flavors whose quota fits, in order.
func TestTopologyFlavorFallback(t *testing.T) {
	levels := []string{zoneKey, rackKey, hostKey}
	tests := []struct {
		name    string
		nominal []int64 // GPUs of h200, then h100
		// provisions: h100 books capacity (IfNeeded), with a pool of 8-GPU nodes.
		provisions bool
		nodes      []Node
		pods       int32
		// wantFlavor is the flavor admitted on ("": not admitted).
		wantFlavor    string
		wantProvision bool
		wantReason    PendingReason
		wantMsg       []string // in order
	}{
		{
			name: "stays on the first flavor when a domain there takes it", nominal: []int64{100, 100},
			nodes: []Node{flavorNode("a1", "h200", "r1", 8), flavorNode("a2", "h200", "r1", 8), flavorNode("b1", "h100", "r9", 8), flavorNode("b2", "h100", "r9", 8)},
			pods:  2, wantFlavor: "h200",
		},
		{
			name: "falls back to the second flavor when the first has quota but no domain", nominal: []int64{100, 100},
			nodes: []Node{flavorNode("a1", "h200", "r1", 8), flavorNode("a2", "h200", "r2", 8), flavorNode("b1", "h100", "r9", 8), flavorNode("b2", "h100", "r9", 8)},
			pods:  2, wantFlavor: "h100",
		},
		{
			name: "falls back from existing nodes to a flavor that provisions", nominal: []int64{100, 100}, provisions: true,
			nodes: []Node{flavorNode("a1", "h200", "r1", 8), flavorNode("a2", "h200", "r1", 0)},
			pods:  2, wantFlavor: "h100", wantProvision: true,
		},
		{
			name: "a flavor without quota for the gang is not tried", nominal: []int64{100, 8},
			nodes: []Node{flavorNode("a1", "h200", "r1", 8), flavorNode("b1", "h100", "r9", 8), flavorNode("b2", "h100", "r9", 8)},
			pods:  2, wantReason: TopologyUnavailable,
			wantMsg: []string{
				"flavor h200: no example.com/rack domain of flavor h200 has free capacity for all 2 pods; most free: 8 nvidia.com/gpu in example.com/rack=r1",
				"; flavor h100: quota exhausted: requested 16 nvidia.com/gpu, available 8",
			},
		},
		{
			name: "no flavor takes it: each gives its reason", nominal: []int64{100, 100},
			nodes: []Node{flavorNode("a1", "h200", "r1", 8), flavorNode("b1", "h100", "r9", 4)},
			pods:  2, wantReason: TopologyUnavailable,
			wantMsg: []string{
				"flavor h200: no example.com/rack domain of flavor h200 has free capacity for all 2 pods; most free: 8 nvidia.com/gpu",
				"; flavor h100: no example.com/rack domain of flavor h100 has free capacity for all 2 pods; most free: 4 nvidia.com/gpu",
			},
		},
		{
			name: "a flavor that may take it later outweighs one that never can", nominal: []int64{100, 100},
			nodes: []Node{sized(flavorNode("a1", "h200", "r1", 8), 8), flavorNode("b1", "h100", "r9", 4)},
			pods:  2, wantReason: TopologyUnavailable,
			wantMsg: []string{
				"flavor h200: no example.com/rack domain of flavor h200 can ever hold all 2 pods",
				"; flavor h100: no example.com/rack domain of flavor h100 has free capacity for all 2 pods; most free: 4 nvidia.com/gpu",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, DefaultOptions())
			mustCQ(t, e, newCQ("a", "", []string{"h200", "h100"}, tc.nominal))
			second := Flavor{Name: "h100", Levels: levels}
			if tc.provisions {
				second.Provisioning = ProvisioningPolicy{Mode: ProvisionIfNeeded}
			}
			for _, f := range []Flavor{{Name: "h200", Levels: levels}, second} {
				if err := e.UpsertFlavor(f); err != nil {
					t.Fatal(err)
				}
			}
			for _, n := range tc.nodes {
				if err := e.UpsertNode(n); err != nil {
					t.Fatal(err)
				}
			}
			if tc.provisions {
				p := rackPool("pool-h100", "r9")
				p.Flavor = "h100"
				if err := e.UpsertPool(p); err != nil {
					t.Fatal(err)
				}
			}
			mustWL(t, e, gang("g", tc.pods, 8, TopologyRequired, rackKey))
			res := cycle(t, e)
			if tc.wantFlavor == "" {
				if len(res.Admitted) != 0 {
					t.Fatalf("admitted %v, want %s", admittedNames(res), tc.wantReason)
				}
				p, _ := pendingReason(res, "g")
				if p.Reason != tc.wantReason || !strings.HasPrefix(p.Message, tc.wantMsg[0]) || !strings.Contains(p.Message, tc.wantMsg[1]) {
					t.Fatalf("pending %s %q, want %s with %q", p.Reason, p.Message, tc.wantReason, tc.wantMsg)
				}
				// Explain evaluates the same way: the same reason and message.
				if ex, ok := e.Explain(key("g")); !ok || ex.Reason != p.Reason || ex.Message != p.Message {
					t.Fatalf("explain %s %q, want %s %q", ex.Reason, ex.Message, p.Reason, p.Message)
				}
				return
			}
			if len(res.Admitted) != 1 {
				t.Fatalf("%s", fmtResult(res))
			}
			a := res.Admitted[0].Admission
			if got := a.PodSets[0].Flavors[gpu]; got != tc.wantFlavor || a.Topology == nil || a.Topology.Flavor != tc.wantFlavor {
				t.Fatalf("admitted on %s, topology %+v, want %s", got, a.Topology, tc.wantFlavor)
			}
			if got := a.Provisioning != nil; got != tc.wantProvision {
				t.Fatalf("provisioning %+v, want booking %v", a.Provisioning, tc.wantProvision)
			}
			if tc.wantProvision && a.Provisioning.Flavor != tc.wantFlavor {
				t.Fatalf("books on %s, want %s", a.Provisioning.Flavor, tc.wantFlavor)
			}
		})
	}
}
