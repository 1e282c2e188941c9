package lifecycle

import (
	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// reasons maps every pending reason of the engine to the API's; a test
// checks that none is missing.
var reasons = map[admission.PendingReason]berthv1.WorkloadReason{
	admission.ClusterQueueNotFound:    berthv1.ReasonClusterQueueNotFound,
	admission.ClusterQueueStopped:     berthv1.ReasonClusterQueueStopped,
	admission.FlavorNotFound:          berthv1.ReasonFlavorsNotFound,
	admission.UnsupportedResource:     berthv1.ReasonUnsupportedResource,
	admission.ExceedsMaxQuota:         berthv1.ReasonExceedsMaxQuota,
	admission.NoMatchingFlavor:        berthv1.ReasonNoMatchingFlavor,
	admission.InsufficientQuota:       berthv1.ReasonInsufficientQuota,
	admission.WaitingForPreemption:    berthv1.ReasonWaitingForPreemption,
	admission.BlockedByHead:           berthv1.ReasonBlockedByHead,
	admission.ReservedForHead:         berthv1.ReasonReservedForHead,
	admission.UnknownTopologyLevel:    berthv1.ReasonUnknownTopologyLevel,
	admission.TopologyUnavailable:     berthv1.ReasonTopologyUnavailable,
	admission.ExceedsDomainCapacity:   berthv1.ReasonExceedsDomainCapacity,
	admission.ProvisioningBackoff:     berthv1.ReasonProvisioningFailed,
	admission.Deactivated:             berthv1.ReasonDeactivated,
	admission.LocalQueueNotFound:      berthv1.ReasonLocalQueueNotFound,
	admission.LocalQueueStopped:       berthv1.ReasonLocalQueueStopped,
	admission.NamespaceNotAllowed:     berthv1.ReasonNamespaceNotAllowed,
	admission.HeadroomNotAllowed:      berthv1.ReasonHeadroomNotAllowed,
	admission.PriorityClassNotAllowed: berthv1.ReasonPriorityClassNotAllowed,
}

// evictionReasons maps every eviction reason of the engine to the API's; a
// test checks that none is missing.
var evictionReasons = map[admission.EvictionReason]berthv1.WorkloadReason{
	admission.EvictDeactivated:         berthv1.ReasonDeactivated,
	admission.EvictClusterQueueStopped: berthv1.ReasonClusterQueueStopped,
	admission.EvictLocalQueueStopped:   berthv1.ReasonLocalQueueStopped,
	admission.EvictResized:             berthv1.ReasonResized,
	admission.EvictInvalidSpec:         berthv1.ReasonInvalidSpec,
}

// ReasonOf is the API reason of an engine pending reason.
func ReasonOf(r admission.PendingReason) berthv1.WorkloadReason {
	if out, ok := reasons[r]; ok {
		return out
	}
	return berthv1.WorkloadReason(r)
}

// EngineReason maps a reason in a Workload's status back to the engine's,
// or keeps the API's word for reasons only the controllers write.
func EngineReason(r berthv1.WorkloadReason) admission.PendingReason {
	for er, ar := range reasons {
		if ar == r {
			return er
		}
	}
	return admission.PendingReason(r)
}
