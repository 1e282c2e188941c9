package sim

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/cmd/internal/sim/trace"
)

// growingRack is oneRack whose node group has one node and may grow to
// three.
var growingRack = strings.Replace(oneRack, "minNodes: 3", "minNodes: 1", 1)

// TestHostGangBooksOneNode: a replica of two 4-GPU pods that must share a
// node, with the rack's one node busy and its node group able to grow, gets
// one new node under berth, and both pods run on it.
func TestHostGangBooksOneNode(t *testing.T) {
	sc := readScenarioString(t, growingRack)
	replica := gangJob("replica", "team-a", time.Minute, 2, trace.Topology{Mode: trace.Required, Level: corev1.LabelHostname})
	replica.Requests = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4"), "cpu": resource.MustParse("40"), "memory": resource.MustParse("400Gi")}
	tr := trace.Trace{Jobs: []trace.Job{gangJob("busy", "team-a", 0, 1, trace.Topology{}), replica}}
	r, res := runPolicy(t, sc, tr, Berth)
	if res.Started != 2 {
		t.Fatalf("started %d of 2:\n%s", res.Started, r.log)
	}
	j := r.jobs[1]
	if j.firstStart < 0 || j.firstStart >= time.Hour {
		t.Fatalf("the replica started at %s, want before the busy job's hour ends:\n%s", j.firstStart, r.log)
	}
	log := r.log.(interface{ String() string }).String()
	for _, want := range []string{"replica-1: CapacityIsProvisioned, 1 new nodes", "capacity provisioned by replica-1 (best-effort-atomic-scale-up.autoscaling.x-k8s.io) in example.com/rack=a,kubernetes.io/hostname=rack-a-"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}
