package lifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// FlavorToEngine is the engine's view of a ResourceFlavor: its levels, its
// tolerations (added to the pods released on it, so they count wherever its
// pod sets are placed) and its provisioning policy, zero fields meaning the
// engine's defaults (the API's own defaults apply to objects written since
// they exist).
func FlavorToEngine(rf *berthv1.ResourceFlavor) admission.Flavor {
	f := admission.Flavor{Name: rf.Name, Levels: rf.Spec.TopologyLevels, Provisioning: admission.ProvisioningPolicy{Mode: admission.ProvisionNever},
		Tolerations: TolerationsToEngine(rf.Spec.Tolerations)}
	if p := rf.Spec.Provisioning; p != nil {
		f.Provisioning = admission.ProvisioningPolicy{
			Mode: provisioningModes.engine(p.Mode), MaxAttempts: p.MaxAttempts,
			SinglePodJobs:           singlePodJobs.engine(p.SinglePodJobs),
			Backoff:                 seconds(p.BackoffSeconds),
			CapacityNotFoundTimeout: seconds(p.CapacityNotFoundSeconds),
			AnswerTimeout:           seconds(p.AnswerTimeoutSeconds),
			ChecksPodsReady:         p.PodsReadySeconds > 0,
		}
		if p.Mode == "" {
			f.Provisioning.Mode = admission.ProvisionIfNeeded
		}
	}
	return f
}

func seconds(s int32) time.Duration { return time.Duration(max(s, 0)) * time.Second }

// PoolToEngine is the engine's view of a CapacityPool with nodes nodes: the
// nodes it can still create are its maximum less the nodes it has. berth
// counts the nodes itself and keeps the nodes it booked reserved until they
// exist; no autoscaler writes what berth needs into the pool's status. The
// template's taints go with it: cluster-autoscaler runs the scheduler's
// predicates against the template node, so a pod that does not tolerate
// them is never given a node of the pool.
func PoolToEngine(p *berthv1.CapacityPool, nodes int32) admission.Pool {
	out := admission.Pool{
		Name: p.Name, Flavor: p.Spec.Flavor, Labels: p.Spec.NodeTemplate.Labels,
		Available:    max(0, p.Spec.MaxNodes-nodes),
		NodeCapacity: CapacityToEngine(p.Spec.NodeTemplate.Allocatable),
		Taints:       TaintsToEngine(p.Spec.NodeTemplate.Taints),
	}
	return out
}

// CapacityToEngine is the engine's form of a node's (or a node template's)
// capacity, in milli-units. A negative amount (more requested than a node
// has, as the kubelet may report) counts as none.
func CapacityToEngine(rl corev1.ResourceList) admission.Resources {
	out := make(admission.Resources, len(rl))
	for name, q := range rl {
		out[admission.ResourceName(name)] = max(0, q.MilliValue())
	}
	return out
}
