package admission

import (
	"slices"
	"testing"
)

// TestWaitingGangWakesOnlyForAPodItCanPlace checks that a gang waiting for
// topology capacity is evaluated again only when a node's capacity grows
// enough to take one of its pods, and is admitted then.
func TestWaitingGangWakesOnlyForAPodItCanPlace(t *testing.T) {
	e := topoEngine(t, rackNode("n1", "a", "r1", 4), rackNode("n2", "a", "r1", 4))
	mustWL(t, e, gang("g", 2, 8, TopologyRequired, rackKey))
	if p, _ := pendingReason(cycle(t, e), "g"); p.Reason != TopologyUnavailable {
		t.Fatalf("pending %q, want %s", p.Reason, TopologyUnavailable)
	}
	steps := []struct {
		name      string
		node      Node
		evaluated bool
	}{
		{"less free capacity", rackNode("n1", "a", "r1", 2), false},
		{"more, but no room for a pod of 8", rackNode("n1", "a", "r1", 7), false},
		{"the same again", rackNode("n1", "a", "r1", 7), false},
		{"room for one pod", rackNode("n1", "a", "r1", 8), true},
		{"room for the other", rackNode("n2", "a", "r1", 8), true},
	}
	for _, s := range steps {
		before := e.evaluations
		if err := e.UpsertNode(s.node); err != nil {
			t.Fatal(err)
		}
		res := cycle(t, e)
		if got := e.evaluations > before; got != s.evaluated {
			t.Fatalf("%s: evaluated %v, want %v (%s)", s.name, got, s.evaluated, fmtResult(res))
		}
		if s.name == "room for the other" && !slices.Equal(admittedNames(res), []string{"g"}) {
			t.Fatalf("%s: admitted %v, want [g]", s.name, admittedNames(res))
		}
	}
}

// TestDomainIndexFollowsTheNodes checks that the domains placement sees
// follow nodes that change racks, join and leave.
func TestDomainIndexFollowsTheNodes(t *testing.T) {
	e := topoEngine(t, rackNode("n1", "a", "r1", 8), rackNode("n2", "a", "r1", 8), rackNode("n3", "a", "r2", 8))
	mustWL(t, e, gang("g", 3, 8, TopologyRequired, rackKey))
	if p, _ := pendingReason(cycle(t, e), "g"); p.Reason != TopologyUnavailable {
		t.Fatalf("pending %q, want %s: no rack has three nodes", p.Reason, TopologyUnavailable)
	}
	// n3 is moved to rack r1: r1 holds the gang now.
	if err := e.UpsertNode(rackNode("n3", "a", "r1", 8)); err != nil {
		t.Fatal(err)
	}
	res := cycle(t, e)
	if len(res.Admitted) != 1 {
		t.Fatalf("not admitted after n3 moved to r1: %s", fmtResult(res))
	}
	if d := res.Admitted[0].Admission.Topology.Domain; !slices.Equal(d, []string{"a", "r1"}) {
		t.Fatalf("domain %v, want [a r1]", d)
	}
	if got := domainsOf(e.topo.flavorTopo["h200"], 1, false); len(got) != 1 {
		t.Fatalf("rack domains %v, want only r1", got)
	}
	e.DeleteNode("n1")
	if got := e.topo.flavorTopo["h200"].nodesIn([]string{"a", "r1"}); len(got) != 2 || got[0].name != "n2" || got[1].name != "n3" {
		t.Fatalf("nodes of r1 after n1 left: %d, want n2 and n3", len(got))
	}
	if err := e.UpsertNode(rackNode("n4", "b", "r9", 8)); err != nil {
		t.Fatal(err)
	}
	if got := domainsOf(e.topo.flavorTopo["h200"], 1, false); !slices.EqualFunc(got, [][]string{{"a", "r1"}, {"b", "r9"}}, slices.Equal) {
		t.Fatalf("rack domains %v, want [[a r1] [b r9]]", got)
	}
}
