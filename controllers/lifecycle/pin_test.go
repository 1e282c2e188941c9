package lifecycle

import (
	"errors"
	"strings"
	"testing"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// oneNode is a gang's hostname domain in rack r1 whose node is still to be
// created (node "") or the node it was pinned to.
func oneNode(node string) *berthv1.TopologyAssignment {
	return &berthv1.TopologyAssignment{Flavor: "h200", Levels: []string{"rack", admission.HostnameLevel}, Values: []string{"r1", node}}
}

// TestProvisionPinsTheGangToItsNode: the start of a gang that must fit one
// new node writes the node into its admission, so that its pods are released
// pinned to it; a start without the node, or with one outside the booked
// domain, is refused.
func TestProvisionPinsTheGangToItsNode(t *testing.T) {
	reserved := func() *berthv1.Workload {
		wl := newWorkload()
		a := booked()
		a.Topology = oneNode("")
		a.Provisioning.NewNodes = []berthv1.PoolNodes{{Pool: "big-r1", Nodes: 1}}
		must(t, wl, Reserve{Admission: a, Generation: 3, Attempt: 1, Flavor: "h200", MaxAttempts: 3})
		return wl
	}
	wl := reserved()
	if sel := wl.Status.Admission.Topology.NodeSelector(); len(sel) != 1 || sel["rack"] != "r1" {
		t.Fatalf("node selector %v while the node is to be created, want the rack only", sel)
	}
	if c := Condition(wl, berthv1.ConditionAdmitted); c == nil || !strings.Contains(c.Message, "kubernetes.io/hostname=(a new node)") {
		t.Fatalf("Admitted %+v, want the booking's message to name a new node", c)
	}
	must(t, wl, Provision{Attempt: 1, Pin: oneNode("big-r1-0")})
	if PhaseOf(wl) != Admitted || wl.Status.Admission.Topology.Values[1] != "big-r1-0" {
		t.Fatalf("phase %s, topology %+v: want admitted, pinned to big-r1-0", PhaseOf(wl), wl.Status.Admission.Topology)
	}
	if sel := wl.Status.Admission.Topology.NodeSelector(); sel[admission.HostnameLevel] != "big-r1-0" {
		t.Fatalf("node selector %v, want the pinned node", sel)
	}
	if got := wl.Status.Provisioning.Topology; !got.AwaitsNode() {
		t.Fatalf("booking domain %+v, want the booked one (a new node), which a failure avoids", got)
	}
	for name, pin := range map[string]*berthv1.TopologyAssignment{
		"no pin":               nil,
		"a pin without a node": oneNode(""),
		"another rack":         {Flavor: "h200", Levels: oneNode("").Levels, Values: []string{"r2", "n"}},
		"another flavor":       {Flavor: "b200", Levels: oneNode("").Levels, Values: []string{"r1", "n"}},
	} {
		var refused *RefusedError
		if err := Apply(reserved(), Provision{Attempt: 1, Pin: pin}, t0); !errors.As(err, &refused) {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
	if err := Apply(inPhase(t, Reserved), Provision{Attempt: 1, Pin: oneNode("n")}, t0); err == nil {
		t.Errorf("a gang that awaits no node was pinned")
	}
}

// TestBookingStartCarriesThePin: the engine's start of a gang pinned to its
// node becomes a Provision that writes the pin.
func TestBookingStartCarriesThePin(t *testing.T) {
	d := admission.BookingDecision{Action: admission.BookingStart, Attempt: 2, Topology: &admission.TopologyAssignment{
		Flavor: "h200", Level: admission.HostnameLevel, Levels: []string{"rack", admission.HostnameLevel}, Domain: []string{"r1", "n"}}}
	p, ok := BookingTransition(d).(Provision)
	if !ok || p.Pin == nil || p.Pin.Values[1] != "n" || p.Attempt != 2 {
		t.Fatalf("transition %+v, want a Provision pinned to n", BookingTransition(d))
	}
}
