package admission

import "fmt"

// Single-pod jobs on a flavor that provisions. A booking is worth what it
// guarantees: a gang gets all its pods' capacity or none, in the domain the
// engine chose, and a topology-bound workload gets its domain. A workload of
// one pod with no topology request needs neither: one pod is never half
// started, and any node of the flavor will do. Booking it anyway costs a
// ProvisioningRequest per job, and cluster-autoscaler serves each request
// with nodes of its own, unpinned — a whole node for a 1-GPU job, however
// many such jobs wait — where its scale-up for unschedulable pods packs the
// pending pods of many jobs onto as few new nodes as hold them.
//
// So, by default (SinglePodAutoscaler, the default of ProvisionIfNeeded),
// such a workload on a booking flavor is admitted by quota without a plan
// once its pod fits existing free capacity or a pool of the flavor can still
// create a node that takes it, and released unpinned: the autoscaler's
// pending-pod scale-up gives it a node. Nothing is reserved for it, on nodes
// or in pools (the autoscaler packs several such pods onto one node, which
// a per-workload reservation cannot say); a pod no node and no pool can
// take keeps waiting as a gang does (TopologyUnavailable, or
// ExceedsDomainCapacity when nothing ever could), so its quota is not held
// for capacity that cannot come. SinglePodBook books it as a gang, the only
// policy of ProvisionAlways, which books every admission.

// SinglePodPolicy says whether a single-pod workload with no topology
// request books capacity on a flavor that provisions.
type SinglePodPolicy string

const (
	// SinglePodBook books it as a gang is booked.
	SinglePodBook SinglePodPolicy = "Book"
	// SinglePodAutoscaler admits it without a booking, for the autoscaler's
	// scale-up for pending pods to serve.
	SinglePodAutoscaler SinglePodPolicy = "Autoscaler"
)

// singlePods is the policy in force: the mode's default when unset.
func (p ProvisioningPolicy) singlePods() SinglePodPolicy {
	switch {
	case p.SinglePodJobs != "":
		return p.SinglePodJobs
	case p.Mode == ProvisionIfNeeded:
		return SinglePodAutoscaler
	}
	return SinglePodBook
}

// leftToAutoscaler reports whether w, placed on a flavor with this policy,
// is admitted without a booking of its own: a single pod with no topology
// request, on a flavor that leaves such pods to the autoscaler.
func (p ProvisioningPolicy) leftToAutoscaler(w *wl) bool {
	return p.Mode == ProvisionIfNeeded && p.singlePods() == SinglePodAutoscaler && w.topo == nil && w.podCount() == 1
}

// validateSinglePods refuses an unknown policy, and Autoscaler with
// ProvisionAlways, which books every admission.
func (p ProvisioningPolicy) validateSinglePods() error {
	switch p.SinglePodJobs {
	case "", SinglePodBook, SinglePodAutoscaler:
	default:
		return fmt.Errorf("single-pod jobs %q must be Book or Autoscaler", p.SinglePodJobs)
	}
	if p.Mode == ProvisionAlways && p.SinglePodJobs == SinglePodAutoscaler {
		return fmt.Errorf("single-pod jobs %q contradict provisioning %q, which books every admission", p.SinglePodJobs, p.Mode)
	}
	return nil
}
