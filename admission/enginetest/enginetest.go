// Package enginetest builds small admission engines for the tests of the
// packages that turn the engine's results into API writes, so that they
// test what the engine decides rather than hand-written results.
package enginetest

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/admission"
)

// OneCPU is a pod set of one pod of one CPU.
var OneCPU = []admission.PodSet{{Name: "main", Count: 1, Requests: admission.Resources{"cpu": 1000}}}

// Running is OneCPU's admission in ClusterQueue "cq", on flavor "f".
func Running() *admission.Admission {
	return &admission.Admission{ClusterQueue: "cq",
		PodSets: []admission.PodSetAssignment{{Name: "main", Count: 1, Flavors: map[admission.ResourceName]string{"cpu": "f"}}}}
}

// PreemptingQueue is an engine with ClusterQueue "cq" of one CPU on flavor
// "f", which preempts lower priority within it, holding workloads (in "cq";
// give an admitted one Running()), after one cycle; it returns the cycle's
// result too.
func PreemptingQueue(t testing.TB, workloads ...admission.Workload) (*admission.Engine, admission.Result) {
	t.Helper()
	e, err := admission.New(admission.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	cq := admission.ClusterQueue{Name: "cq", FairShareWeight: 1000,
		Preemption: admission.PreemptionPolicy{WithinClusterQueue: admission.PreemptLowerPriority},
		ResourceGroups: []admission.ResourceGroup{{CoveredResources: []admission.ResourceName{"cpu"},
			Flavors: []admission.FlavorQuotas{{Flavor: "f", Resources: map[admission.ResourceName]admission.Quota{"cpu": {Nominal: 1000}}}}}}}
	if err := e.UpsertClusterQueue(cq); err != nil {
		t.Fatal(err)
	}
	for _, w := range workloads {
		if err := e.UpsertWorkload(w); err != nil {
			t.Fatal(err)
		}
	}
	return e, e.Cycle(time.Unix(1000, 0))
}
