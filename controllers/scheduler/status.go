package scheduler

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// QueueStatus is what a ClusterQueue's status reports about its workloads.
type QueueStatus struct {
	// PendingWorkloads waiting in the queue; Inadmissible of them did not
	// fit for lack of quota and wait for some to be released.
	PendingWorkloads int32
	Inadmissible     int32
	// Held counts, by reason, the pending workloads that can never be
	// admitted as they are (admission.PendingReason.NeedsChange).
	Held map[string]int
	// WeightedShare is the queue's dominant share of what it borrows from
	// its cohort divided by its weight: 0 when it borrows nothing, +Inf
	// when a queue of weight 0 borrows.
	WeightedShare float64
	// AdmittedWorkloads holding its quota.
	AdmittedWorkloads int32
	// FlavorsUsage is the quota in use per flavor, in the queue's order.
	FlavorsUsage []berthv1.FlavorUsage
	// AdmittedUsage is, per flavor and resource of FlavorsUsage, the part
	// of its Total held by workloads that may run: not by those still
	// booking capacity (the Workload's Admitted condition is False with
	// WaitingForCapacity), nor for preemptors. The status has no field for
	// it; the metrics report it.
	AdmittedUsage map[FlavorResource]resource.Quantity
}

// FlavorResource names one resource of one flavor.
type FlavorResource struct {
	Flavor   string
	Resource corev1.ResourceName
}

// ClusterQueueStatus reports a ClusterQueue's workloads and usage as the
// engine sees them.
func (s *Scheduler) ClusterQueueStatus(name string) (QueueStatus, bool) {
	s.mu.Lock()
	u, ok := s.engine.ClusterQueueUsage(name)
	s.mu.Unlock()
	if !ok {
		return QueueStatus{}, false
	}
	out := QueueStatus{PendingWorkloads: int32(u.Pending), Inadmissible: int32(u.Inadmissible), AdmittedWorkloads: int32(u.Admitted),
		WeightedShare: WeightedShare(u.DominantResourceShare)}
	for reason, n := range u.Held {
		if out.Held == nil {
			out.Held = map[string]int{}
		}
		out.Held[string(reason)] = n
	}
	for _, f := range u.Flavors {
		fu := berthv1.FlavorUsage{Name: f.Flavor, Resources: make([]berthv1.ResourceUsage, 0, len(f.Resources))}
		for _, r := range f.Resources {
			if out.AdmittedUsage == nil {
				out.AdmittedUsage = map[FlavorResource]resource.Quantity{}
			}
			out.AdmittedUsage[FlavorResource{Flavor: f.Flavor, Resource: corev1.ResourceName(r.Name)}] = lifecycle.Quantity(r.Name, r.Admitted)
			fu.Resources = append(fu.Resources, berthv1.ResourceUsage{
				Name:     corev1.ResourceName(r.Name),
				Total:    lifecycle.Quantity(r.Name, r.Total),
				Borrowed: lifecycle.Quantity(r.Name, r.Borrowed),
			})
		}
		out.FlavorsUsage = append(out.FlavorsUsage, fu)
	}
	return out, true
}

// WeightedShare turns the engine's dominant resource share (parts per
// billion) into a ratio.
func WeightedShare(drs int64) float64 {
	if drs == math.MaxInt64 {
		return math.Inf(1)
	}
	return float64(drs) / 1e9
}
