package sim

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/internal/sim/trace"
	"github.com/berth-dev/berth/controllers/headroom"
)

// HeadroomModel keeps warm capacity for the replicas of one inference
// service: node groups labelled and tainted berth.dev/headroom=Pool hold
// it, only the service's pods tolerate the taint (so borrowers never run
// there), and, with a Policy, the autoscaler keeps room in them for as
// many whole replicas as the policy sizes, as cluster-autoscaler keeps a
// CapacityBuffer's (docs/autoscaler.md): a replica lands on that room at
// once, and the autoscaler then restores it. Without a Policy the pools
// are only the service's own nodes: an always-on fleet, sized by the
// pools' minNodes.
type HeadroomModel struct {
	// Class is the service's name, its replicas' class in the trace.
	Class string `json:"class"`
	// Pool is the value of the berth.dev/headroom label and taint of the
	// node groups (CapacityPools) the headroom is kept in.
	Pool string `json:"pool"`
	// Policy sizes the headroom; unset, the autoscaler keeps none.
	Policy *HeadroomPolicy `json:"policy,omitempty"`
}

// HeadroomPolicy is headroom.Policy in the scenario's terms.
type HeadroomPolicy struct {
	// Mode is Fixed, Percent or Demand.
	Mode headroom.Mode `json:"mode"`
	// Replicas is the Fixed size; Percent the Percent rule's share.
	Replicas int32 `json:"replicas,omitempty"`
	Percent  int32 `json:"percent,omitempty"`
	// Window, Latency, Percentile, Period and Lead are the Demand rule's.
	Window     Duration `json:"window,omitempty"`
	Latency    Duration `json:"latency,omitempty"`
	Percentile int32    `json:"percentile,omitempty"`
	Period     Duration `json:"period,omitempty"`
	Lead       Duration `json:"lead,omitempty"`
	// Min and Max bound the size; Max 0 is no bound.
	Min int32 `json:"min,omitempty"`
	Max int32 `json:"max,omitempty"`
}

// policy is p as the sizing package takes it.
func (p HeadroomPolicy) policy() headroom.Policy {
	return headroom.Policy{Mode: p.Mode, Replicas: p.Replicas, Percent: p.Percent, Min: p.Min, Max: p.Max,
		Demand: headroom.DemandRule{Window: time.Duration(p.Window), Latency: time.Duration(p.Latency), Percentile: p.Percentile,
			Period: time.Duration(p.Period), Lead: time.Duration(p.Lead)}}
}

// validateHeadroom reports what is wrong with the scenario's headroom:
// each entry needs a class, a pool some CapacityPool is labelled and
// tainted for, and a valid policy.
func (s Scenario) validateHeadroom() []error {
	var errs []error
	classes := map[string]bool{}
	for i, h := range s.Model.Headroom {
		at := fmt.Sprintf("model.headroom[%d]", i)
		if h.Class == "" || h.Pool == "" {
			errs = append(errs, fmt.Errorf("%s: class and pool are required", at))
			continue
		}
		if classes[h.Class] {
			errs = append(errs, fmt.Errorf("%s: class %q has headroom twice", at, h.Class))
		}
		classes[h.Class] = true
		if !s.hasHeadroomPool(h.Pool) {
			errs = append(errs, fmt.Errorf("%s: no CapacityPool's nodeTemplate has the label and NoSchedule taint %s=%s; label and taint the pools the headroom is kept in",
				at, berthv1.HeadroomLabel, h.Pool))
		}
		if h.Policy != nil {
			if err := h.Policy.policy().Validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s.policy: %w", at, err))
			}
		}
	}
	return errs
}

// hasHeadroomPool says whether a CapacityPool's nodes carry pool's label
// and taint.
func (s Scenario) hasHeadroomPool(pool string) bool {
	for _, p := range s.Pools {
		t := p.Spec.NodeTemplate
		if t.Labels[berthv1.HeadroomLabel] == pool && headroomTaint(t.Taints) == pool {
			return true
		}
	}
	return false
}

// headroomTaint is the value of the berth.dev/headroom NoSchedule taint
// among taints, "" without one.
func headroomTaint(taints []corev1.Taint) string {
	for _, t := range taints {
		if t.Key == berthv1.HeadroomLabel && (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) {
			return t.Value
		}
	}
	return ""
}

// keeper is one service's headroom during a run: the replicas the service
// wants, their history, and the size the autoscaler keeps.
type keeper struct {
	model HeadroomModel
	// shape is one replica: its pods, their requests, the topology level
	// it must run whole in ("" for none).
	pods     int32
	requests amounts
	level    string
	// replicas counts the service's replicas submitted and not ended;
	// admissible how many its ClusterQueue's quota holds in all.
	replicas   int32
	admissible int32
	history    *headroom.History
	// size is the headroom to keep now, in replicas; kept what the
	// autoscaler's last loop found room for.
	size, kept int32
}

// newKeepers builds a keeper per headroom entry of the scenario from the
// service's replicas in the trace; a class with no replica keeps nothing.
func (r *run) newKeepers() ([]*keeper, error) {
	var keepers []*keeper
	for _, h := range r.sc.Model.Headroom {
		k := &keeper{model: h, admissible: -1}
		for _, j := range r.jobs {
			if j.spec.ClassOf() != h.Class {
				continue
			}
			j.headroomPool = h.Pool
			if k.pods == 0 {
				k.pods, k.requests = j.spec.Pods, j.requests
				if j.spec.Topology.Mode == trace.Required {
					k.level = j.spec.Topology.Level
				}
				k.admissible = r.admissibleReplicas(j)
			}
			if j.spec.Pods != k.pods || j.requests != k.requests {
				return nil, fmt.Errorf("model.headroom: the replicas of %s differ in shape (%s): headroom is sized in replicas of one shape", h.Class, j.spec.ID)
			}
		}
		if h.Policy != nil {
			p := h.Policy.policy()
			k.history = headroom.NewHistory(p.Demand.Window, p.Demand.Latency)
			k.history.Observe(epoch, 0)
			k.size = p.Size(k.history, epoch, 0, k.admissible)
		}
		keepers = append(keepers, k)
	}
	return keepers, nil
}

// admissibleReplicas is how many replicas like j the nominal quota plus
// borrowing limit of its ClusterQueue holds, in the GPU resource: -1 when
// its queue is not in the scenario or it asks for no GPU.
func (r *run) admissibleReplicas(j *job) int32 {
	gpus := j.gpus
	cq := r.tenant(j)
	if gpus == 0 || cq == "" {
		return -1
	}
	for _, q := range r.sc.ClusterQueues {
		if q.Name != cq {
			continue
		}
		var total int64
		for _, rg := range q.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, res := range f.Resources {
					if res.Name == r.c.gpu {
						total += res.NominalQuota.Value()
						if res.BorrowingLimit != nil {
							total += res.BorrowingLimit.Value()
						}
					}
				}
			}
		}
		return int32(total / gpus)
	}
	return -1
}

// replicasChanged hears that a replica of k's service was submitted
// (+1) or ended (-1) at now, and resizes the headroom.
func (k *keeper) replicasChanged(delta int32, now time.Duration) bool {
	k.replicas += delta
	if k.model.Policy == nil {
		return false
	}
	at := epoch.Add(now)
	k.history.Observe(at, k.replicas)
	admissible := int32(-1)
	if k.admissible >= 0 {
		admissible = max(0, k.admissible-k.replicas)
	}
	size := k.model.Policy.policy().Size(k.history, at, k.replicas, admissible)
	changed := size != k.size
	k.size = size
	return changed
}

// keeperOf is the keeper of j's class, nil without headroom.
func (r *run) keeperOf(j *job) *keeper {
	for _, k := range r.keepers {
		if k.model.Class == j.spec.ClassOf() {
			return k
		}
	}
	return nil
}
