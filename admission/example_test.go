package admission_test

import (
	"fmt"
	"time"

	"github.com/berth-dev/berth/admission"
)

// Example shows the controller's loop: feed queues and workloads, run a cycle,
// persist admissions (confirming them with an upsert, or rolling them back), write
// changed pending statuses.
func Example() {
	e, err := admission.New(admission.DefaultOptions())
	if err != nil {
		panic(err)
	}
	const gpu = admission.ResourceName("nvidia.com/gpu")
	err = e.UpsertClusterQueue(admission.ClusterQueue{
		Name:             "team-a",
		QueueingStrategy: admission.BestEffortFIFO,
		FairShareWeight:  1000,
		ResourceGroups: []admission.ResourceGroup{{
			CoveredResources: []admission.ResourceName{gpu},
			Flavors: []admission.FlavorQuotas{{
				Flavor:    "h200",
				Resources: map[admission.ResourceName]admission.Quota{gpu: {Nominal: 8000}},
			}},
		}},
	})
	if err != nil {
		panic(err)
	}
	for i, gpus := range []int64{4, 8, 2} {
		w := admission.Workload{
			Key:          admission.WorkloadKey{Namespace: "ml", Name: fmt.Sprintf("train-%d", i)},
			ClusterQueue: "team-a",
			CreationTime: int64(i),
			PodSets:      []admission.PodSet{{Name: "workers", Count: 1, Requests: admission.Resources{gpu: gpus * 1000}}},
		}
		if err := e.UpsertWorkload(w); err != nil {
			panic(err)
		}
	}
	res := e.Cycle(time.Unix(0, 0))
	for _, a := range res.Admitted {
		fmt.Printf("admit %s on %s\n", a.Key, a.Admission.PodSets[0].Flavors[gpu])
	}
	for _, p := range res.Pending {
		fmt.Printf("pending %s: %s: %s\n", p.Key, p.Reason, p.Message)
	}
	// Output:
	// admit ml/train-0 on h200
	// admit ml/train-2 on h200
	// pending ml/train-1: InsufficientQuota: insufficient quota for nvidia.com/gpu in flavor h200: requested 8, available 4 (nominal 4, borrowable 0)
}
