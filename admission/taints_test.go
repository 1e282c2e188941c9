package admission

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

var reserved = Taint{Key: "example.com/reserved", Value: "true", Effect: TaintNoSchedule}

// tainted is n with taints.
func tainted(n Node, taints ...Taint) Node {
	n.Taints = taints
	return n
}

// taintedPool is p with taints on its template.
func taintedPool(p Pool, taints ...Taint) Pool {
	p.Taints = taints
	return p
}

// tolerating is w with tolerations on its first pod set.
func tolerating(w Workload, tols ...Toleration) Workload {
	w.PodSets[0].Tolerations = tols
	return w
}

func TestTolerates(t *testing.T) {
	tests := []struct {
		name string
		tol  Toleration
		t    Taint
		want bool
	}{
		{"equal key value and effect", Toleration{Key: "k", Operator: TolerationEqual, Value: "v", Effect: TaintNoSchedule}, Taint{"k", "v", TaintNoSchedule}, true},
		{"empty operator means Equal", Toleration{Key: "k", Value: "v"}, Taint{"k", "v", TaintNoExecute}, true},
		{"other value", Toleration{Key: "k", Operator: TolerationEqual, Value: "w"}, Taint{"k", "v", TaintNoSchedule}, false},
		{"other key", Toleration{Key: "j", Operator: TolerationExists}, Taint{"k", "v", TaintNoSchedule}, false},
		{"other effect", Toleration{Key: "k", Operator: TolerationExists, Effect: TaintNoSchedule}, Taint{"k", "v", TaintNoExecute}, false},
		{"exists matches any value", Toleration{Key: "k", Operator: TolerationExists}, Taint{"k", "v", TaintNoSchedule}, true},
		{"empty key and exists match everything", Toleration{Operator: TolerationExists}, Taint{"k", "v", TaintNoExecute}, true},
		{"unknown operator matches nothing", Toleration{Key: "k", Operator: "Gt", Value: "v"}, Taint{"k", "v", TaintNoSchedule}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.tol.Tolerates(tc.t); got != tc.want {
				t.Fatalf("%+v tolerates %v: %v, want %v", tc.tol, tc.t, got, tc.want)
			}
		})
	}
}

// TestTaintsPlacement: rack r1 (one 8-GPU node) is tighter than rack r2 (two),
// so an untainted r1 takes a 1×8 gang; taints the gang does not tolerate
// send it to r2, or book it elsewhere.
func TestTaintsPlacement(t *testing.T) {
	racks := func(taints ...Taint) []Node {
		return []Node{tainted(sized(rackNode("n1", "a", "r1", 8), 8), taints...),
			sized(rackNode("n3", "a", "r2", 8), 8), sized(rackNode("n4", "a", "r2", 8), 8)}
	}
	tolerateReserved := Toleration{Key: reserved.Key, Operator: TolerationEqual, Value: "true", Effect: TaintNoSchedule}
	tests := []struct {
		name       string
		nodes      []Node
		pools      []Pool
		flavorTols []Toleration
		w          Workload
		wantDomain []string
		wantNew    map[string]int32
		wantReason PendingReason
		wantMsg    string
	}{
		{name: "untainted: the tighter rack", nodes: racks(), w: gang("g", 1, 8, TopologyRequired, rackKey), wantDomain: []string{"a", "r1"}},
		{name: "a NoSchedule taint keeps the gang off the node", nodes: racks(reserved),
			w: gang("g", 1, 8, TopologyRequired, rackKey), wantDomain: []string{"a", "r2"}},
		{name: "a NoExecute taint keeps the gang off the node", nodes: racks(Taint{Key: "gone", Effect: TaintNoExecute}),
			w: gang("g", 1, 8, TopologyRequired, rackKey), wantDomain: []string{"a", "r2"}},
		{name: "a PreferNoSchedule taint excludes nothing", nodes: racks(Taint{Key: "soft", Effect: TaintPreferNoSchedule}),
			w: gang("g", 1, 8, TopologyRequired, rackKey), wantDomain: []string{"a", "r1"}},
		{name: "a matching toleration opens the node", nodes: racks(reserved),
			w: tolerating(gang("g", 1, 8, TopologyRequired, rackKey), tolerateReserved), wantDomain: []string{"a", "r1"}},
		{name: "exists on the key opens the node", nodes: racks(reserved),
			w: tolerating(gang("g", 1, 8, TopologyRequired, rackKey), Toleration{Key: reserved.Key, Operator: TolerationExists}), wantDomain: []string{"a", "r1"}},
		{name: "a toleration of another value does not", nodes: racks(reserved),
			w: tolerating(gang("g", 1, 8, TopologyRequired, rackKey), Toleration{Key: reserved.Key, Value: "false"}), wantDomain: []string{"a", "r2"}},
		{name: "the flavor's tolerations count", nodes: racks(reserved), flavorTols: []Toleration{tolerateReserved},
			w: gang("g", 1, 8, TopologyRequired, rackKey), wantDomain: []string{"a", "r1"}},
		{name: "a tainted pool is not booked: the untainted rack is, at once",
			pools: []Pool{taintedPool(rackPool("pool-r1", "r1"), reserved), rackPool("pool-r2", "r2")},
			w:     gang("g", 2, 8, TopologyRequired, rackKey), wantDomain: []string{"a", "r2"}, wantNew: map[string]int32{"pool-r2": 2}},
		{name: "a gang that tolerates the pool's taint may book it",
			pools: []Pool{taintedPool(rackPool("pool-r1", "r1"), reserved), rackPool("pool-r2", "r2")},
			w:     tolerating(gang("g", 2, 8, TopologyRequired, rackKey), tolerateReserved), wantDomain: []string{"a", "r1"}, wantNew: map[string]int32{"pool-r1": 2}},
		{name: "the flavor's tolerations open a tainted pool", flavorTols: []Toleration{{Operator: TolerationExists}},
			pools: []Pool{taintedPool(rackPool("pool-r1", "r1"), reserved), rackPool("pool-r2", "r2")},
			w:     gang("g", 2, 8, TopologyRequired, rackKey), wantDomain: []string{"a", "r1"}, wantNew: map[string]int32{"pool-r1": 2}},
		{name: "every rack tainted: the message names the taints",
			nodes: []Node{tainted(sized(rackNode("n1", "a", "r1", 8), 8), reserved)},
			pools: []Pool{taintedPool(rackPool("pool-r1", "r1"), reserved)},
			w:     gang("g", 2, 8, TopologyRequired, rackKey), wantReason: ExceedsDomainCapacity,
			wantMsg: "example.com/rack=r1: nodes and pool carry taint example.com/reserved=true:NoSchedule that the pods do not tolerate"},
		{name: "a tainted pool is no future capacity: the gang waits for the rack's nodes",
			nodes: []Node{sized(rackNode("n1", "a", "r1", 0), 8)},
			pools: []Pool{taintedPool(rackPool("pool-r1", "r1"), Taint{Key: "gone", Effect: TaintNoExecute})},
			w:     gang("g", 1, 8, TopologyRequired, rackKey), wantReason: TopologyUnavailable,
			wantMsg: "example.com/rack=r1: pool carries taint gone:NoExecute that the pods do not tolerate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := provEngine(t, ProvisionIfNeeded, tc.nodes, tc.pools...)
			if tc.flavorTols != nil {
				f := Flavor{Name: "h200", Levels: []string{zoneKey, rackKey, hostKey}, Provisioning: ProvisioningPolicy{Mode: ProvisionIfNeeded},
					Tolerations: tc.flavorTols}
				if err := e.UpsertFlavor(f); err != nil {
					t.Fatal(err)
				}
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
			if a.Topology == nil || !slices.Equal(a.Topology.Domain, tc.wantDomain) {
				t.Fatalf("topology %+v, want domain %v", a.Topology, tc.wantDomain)
			}
			if tc.wantNew != nil && (a.Provisioning == nil || !maps.Equal(a.Provisioning.NewNodes, tc.wantNew)) {
				t.Fatalf("provisioning %+v, want new nodes %v", a.Provisioning, tc.wantNew)
			}
		})
	}
}

// TestTaintChangeRequeues: a gang that waits because of a node's taint is
// admitted once the taint is gone, and one whose tolerations change is
// evaluated again with them.
func TestTaintChangeRequeues(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, e *Engine)
	}{
		{"the node's taint is removed", func(t *testing.T, e *Engine) {
			if err := e.UpsertNode(rackNode("n1", "a", "r1", 8)); err != nil {
				t.Fatal(err)
			}
		}},
		{"the gang tolerates it", func(t *testing.T, e *Engine) {
			mustWL(t, e, tolerating(gang("g", 1, 8, TopologyRequired, rackKey), Toleration{Key: reserved.Key, Operator: TolerationExists}))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := topoEngine(t, tainted(rackNode("n1", "a", "r1", 8), reserved))
			mustWL(t, e, gang("g", 1, 8, TopologyRequired, rackKey))
			if res := cycle(t, e); len(res.Admitted) != 0 {
				t.Fatalf("admitted onto a node whose taint it does not tolerate: %s", fmtResult(res))
			}
			tc.change(t, e)
			if res := cycle(t, e); len(res.Admitted) != 1 {
				t.Fatalf("not admitted after %s: %s", tc.name, fmtResult(res))
			}
		})
	}
}
