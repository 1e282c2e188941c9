package admission

import (
	"slices"
	"strings"
	"testing"
)

const (
	zoneKey = "topology.kubernetes.io/zone"
	rackKey = "example.com/rack"
	hostKey = "kubernetes.io/hostname"
)

// rackNode is a node of flavor h200 in zone/rack with gpus free.
func rackNode(name, zone, rack string, gpus int64) Node {
	return Node{Name: name, Flavors: []string{"h200"},
		Labels: map[string]string{zoneKey: zone, rackKey: rack, hostKey: name}, Free: Resources{gpu: gpus * 1000}}
}

// topoEngine has ClusterQueue "a" with 100 GPUs of flavor h200, whose levels are
// zone, rack, hostname, and the nodes given.
func topoEngine(t *testing.T, nodes ...Node) *Engine {
	t.Helper()
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{100}))
	if err := e.UpsertFlavor(Flavor{Name: "h200", Levels: []string{zoneKey, rackKey, hostKey}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := e.UpsertNode(n); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func gang(name string, pods int32, gpus int64, mode TopologyMode, level string) Workload {
	w := job(name, "a", 0, 1, pods, gpus)
	w.Topology = &TopologyRequest{Mode: mode, Level: level}
	return w
}

// twoZones: zone a has racks r1 (n1, n2) and r2 (n3, n4), zone b has rack r3 (n5);
// every node has 8 GPUs free.
func twoZones() []Node {
	return []Node{
		rackNode("n1", "a", "r1", 8), rackNode("n2", "a", "r1", 8),
		rackNode("n3", "a", "r2", 8), rackNode("n4", "a", "r2", 8),
		rackNode("n5", "b", "r3", 8),
	}
}

func TestTopologyPlacement(t *testing.T) {
	tests := []struct {
		name       string
		nodes      []Node
		w          Workload
		wantDomain []string // nil: admitted without pinning
		wantLevel  string
		wantReason PendingReason
		wantMsg    string
	}{
		{
			name: "required rack: the first rack that holds the gang", nodes: twoZones(),
			w: gang("g", 2, 8, TopologyRequired, rackKey), wantLevel: rackKey, wantDomain: []string{"a", "r1"},
		},
		{
			name: "required rack: no rack holds 24 GPUs", nodes: twoZones(),
			w: gang("g", 3, 8, TopologyRequired, rackKey), wantReason: TopologyUnavailable,
			wantMsg: "no example.com/rack domain of flavor h200 has free capacity for all 3 pods; most free: 16 nvidia.com/gpu in example.com/rack=r1",
		},
		{
			name: "pods are indivisible: 15 GPUs free per rack do not hold 3 pods of 5", nodes: twoZones(),
			w: gang("g", 3, 5, TopologyRequired, rackKey), wantReason: TopologyUnavailable,
		},
		{
			name: "preferred rack falls back to one zone", nodes: twoZones(),
			w: gang("g", 3, 8, TopologyPreferred, rackKey), wantLevel: zoneKey, wantDomain: []string{"a"},
		},
		{
			name: "preferred rack larger than any zone is admitted unpinned", nodes: twoZones(),
			w: gang("g", 5, 8, TopologyPreferred, rackKey),
		},
		{
			name: "tightest fit keeps the emptier rack whole",
			nodes: []Node{
				rackNode("n1", "a", "r1", 8), rackNode("n2", "a", "r1", 8),
				rackNode("n3", "a", "r2", 8), rackNode("n4", "a", "r2", 0),
			},
			w: gang("g", 1, 8, TopologyRequired, rackKey), wantLevel: rackKey, wantDomain: []string{"a", "r2"},
		},
		{
			name: "a level the flavor does not have", nodes: twoZones(),
			w: gang("g", 1, 8, TopologyRequired, "example.com/block"), wantReason: UnknownTopologyLevel,
			wantMsg: `topology level "example.com/block" is not a level of the workload's flavor (h200 ["topology.kubernetes.io/zone" "example.com/rack" "kubernetes.io/hostname"])`,
		},
		{
			name:  "nodes without the level's label are in no domain",
			nodes: []Node{{Name: "bare", Flavors: []string{"h200"}, Labels: map[string]string{}, Free: Resources{gpu: 8000}}},
			w:     gang("g", 1, 8, TopologyRequired, rackKey), wantReason: TopologyUnavailable,
			wantMsg: "no node of flavor h200 has the example.com/rack label",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := topoEngine(t, tc.nodes...)
			mustWL(t, e, tc.w)
			res := cycle(t, e)
			if tc.wantReason != "" {
				if len(res.Admitted) != 0 {
					t.Fatalf("admitted %v, want %s", admittedNames(res), tc.wantReason)
				}
				p, _ := pendingReason(res, "g")
				if p.Reason != tc.wantReason || !strings.Contains(p.Message, tc.wantMsg) {
					t.Fatalf("pending %s %q, want %s containing %q", p.Reason, p.Message, tc.wantReason, tc.wantMsg)
				}
				return
			}
			if len(res.Admitted) != 1 {
				t.Fatalf("%s", fmtResult(res))
			}
			got := res.Admitted[0].Admission.Topology
			if tc.wantDomain == nil {
				if got != nil {
					t.Fatalf("pinned to %+v, want unpinned", got)
				}
				return
			}
			if got == nil || got.Flavor != "h200" || got.Level != tc.wantLevel || !slices.Equal(got.Domain, tc.wantDomain) {
				t.Fatalf("topology %+v, want level %s domain %v", got, tc.wantLevel, tc.wantDomain)
			}
		})
	}
}

// TestTopologyReservations: capacity planned for one gang is not promised to the
// next; released capacity wakes a waiting gang; an admission rebuilt after a
// restart reserves its domain again.
func TestTopologyReservations(t *testing.T) {
	e := topoEngine(t, twoZones()...)
	g1, g2, g3 := gang("g1", 2, 8, TopologyRequired, rackKey), gang("g2", 2, 8, TopologyRequired, rackKey), gang("g3", 2, 8, TopologyRequired, rackKey)
	g2.CreationTime, g3.CreationTime = 2, 3
	specs := specMap(g1, g2, g3)
	mustWL(t, e, g1, g2, g3)
	res := cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{"g1", "g2"}) {
		t.Fatalf("admitted %v, want g1 and g2", got)
	}
	if d1, d2 := res.Admitted[0].Admission.Topology.Domain, res.Admitted[1].Admission.Topology.Domain; slices.Equal(d1, d2) {
		t.Fatalf("both gangs placed in %v", d1)
	}
	if p, _ := pendingReason(res, "g3"); p.Reason != TopologyUnavailable {
		t.Fatalf("g3 %s, want TopologyUnavailable", p.Reason)
	}
	confirm(t, e, specs, res)
	if got := admittedNames(cycle(t, e)); len(got) != 0 {
		t.Fatalf("admitted %v with no capacity change", got)
	}

	e.DeleteWorkload(key("g1"))
	res = cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{"g3"}) {
		t.Fatalf("after g1 finished admitted %v, want g3", got)
	}

	// A restart: a new engine learns of g2 and g3 as admitted; their racks are
	// reserved, so a new gang finds no rack.
	r := topoEngine(t, twoZones()...)
	for _, a := range res.Admitted {
		w := specs[a.Key.Name]
		adm := a.Admission
		w.Admission = &adm
		mustWL(t, r, w)
	}
	confirm(t, e, specs, res)
	for _, name := range []string{"g2"} {
		mustWL(t, r, specs[name]) // as confirm wrote it
	}
	mustWL(t, r, gang("g4", 2, 8, TopologyRequired, rackKey))
	res = cycle(t, r)
	if p, _ := pendingReason(res, "g4"); len(res.Admitted) != 0 || p.Reason != TopologyUnavailable {
		t.Fatalf("after rebuild: %s; want g4 TopologyUnavailable", fmtResult(res))
	}

	// New capacity wakes it.
	if err := r.UpsertNode(rackNode("n6", "b", "r3", 8)); err != nil {
		t.Fatal(err)
	}
	res = cycle(t, r)
	if got := admittedNames(res); !eqStrings(got, []string{"g4"}) || !slices.Equal(res.Admitted[0].Admission.Topology.Domain, []string{"b", "r3"}) {
		t.Fatalf("after a node was added: %s, want g4 in b/r3", fmtResult(res))
	}
}

// TestTopologyRollback: a rolled-back placement frees its capacity.
func TestTopologyRollback(t *testing.T) {
	e := topoEngine(t, rackNode("n1", "a", "r1", 8))
	mustWL(t, e, gang("g", 1, 8, TopologyRequired, rackKey))
	if got := admittedNames(cycle(t, e)); !eqStrings(got, []string{"g"}) {
		t.Fatalf("admitted %v", got)
	}
	if n := e.topo.nodes["n1"]; n.reserved[e.names.resIDs[gpu]] != 8000 {
		t.Fatalf("n1 reserves %v, want 8 GPUs", n.reserved)
	}
	e.Rollback(key("g"))
	if n := e.topo.nodes["n1"]; !n.reserved.isZero() {
		t.Fatalf("n1 reserves %v after rollback", n.reserved)
	}
	if got := admittedNames(cycle(t, e)); !eqStrings(got, []string{"g"}) {
		t.Fatalf("after rollback admitted %v, want g again", got)
	}
}

// TestTopologyValidation: bad input is rejected with a message and stores nothing.
func TestTopologyValidation(t *testing.T) {
	e := topoEngine(t)
	tests := []struct {
		name    string
		err     error
		wantErr string
	}{
		{name: "mode", err: e.UpsertWorkload(gang("g", 1, 1, "Sometimes", rackKey)), wantErr: `topology.mode "Sometimes"`},
		{name: "level", err: e.UpsertWorkload(gang("g", 1, 1, TopologyRequired, "")), wantErr: "topology.level"},
		{name: "flavor levels", err: e.UpsertFlavor(Flavor{Name: "x", Levels: []string{rackKey, rackKey}}), wantErr: "distinct"},
		{name: "node free", err: e.UpsertNode(Node{Name: "n", Free: Resources{gpu: -1}}), wantErr: "between 0"},
	}
	for _, tc := range tests {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, tc.err, tc.wantErr)
		}
	}
	if len(e.workloads) != 0 || len(e.topo.nodes) != 0 {
		t.Fatalf("invalid input was stored")
	}
}

// TestLevelArrivesAfterGang: a gang that asks for a level its flavor does
// not have (yet) is admitted once the flavor gains it — as when a
// ResourceFlavor reaches berth after the job that uses it.
func TestLevelArrivesAfterGang(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{100}))
	if err := e.UpsertNode(rackNode("n1", "a", "r1", 8)); err != nil {
		t.Fatal(err)
	}
	mustWL(t, e, gang("g", 1, 8, TopologyRequired, rackKey))
	if p, _ := pendingReason(cycle(t, e), "g"); p.Reason != UnknownTopologyLevel {
		t.Fatalf("pending %s, want %s", p.Reason, UnknownTopologyLevel)
	}
	if err := e.UpsertFlavor(Flavor{Name: "h200", Levels: []string{zoneKey, rackKey}}); err != nil {
		t.Fatal(err)
	}
	if res := cycle(t, e); len(res.Admitted) != 1 {
		t.Fatalf("not admitted once the flavor has the level: %s", fmtResult(res))
	}
}
