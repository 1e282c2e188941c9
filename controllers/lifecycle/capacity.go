package lifecycle

import (
	"time"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// FlavorToEngine is the engine's view of a ResourceFlavor: its levels and
// its provisioning policy, zero fields meaning the engine's defaults (the
// API's own defaults apply to objects written since they exist).
func FlavorToEngine(rf *berthv1.ResourceFlavor) admission.Flavor {
	f := admission.Flavor{Name: rf.Name, Levels: rf.Spec.TopologyLevels, Provisioning: admission.ProvisioningPolicy{Mode: admission.ProvisionNever}}
	if p := rf.Spec.Provisioning; p != nil {
		f.Provisioning = admission.ProvisioningPolicy{
			Mode: provisioningModes.engine(p.Mode), MaxAttempts: p.MaxAttempts,
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
// exist; no autoscaler writes what berth needs into the pool's status.
func PoolToEngine(p *berthv1.CapacityPool, nodes int32) admission.Pool {
	out := admission.Pool{
		Name: p.Name, Flavor: p.Spec.Flavor, Labels: p.Spec.NodeTemplate.Labels,
		Available:    max(0, p.Spec.MaxNodes-nodes),
		NodeCapacity: make(admission.Resources, len(p.Spec.NodeTemplate.Allocatable)),
	}
	for name, q := range p.Spec.NodeTemplate.Allocatable {
		out.NodeCapacity[admission.ResourceName(name)] = max(0, q.MilliValue())
	}
	return out
}
