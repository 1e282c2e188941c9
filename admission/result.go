package admission

// PendingReason says why a pending workload is not admitted. Reasons are stable
// identifiers suitable for a status condition's Reason field.
type PendingReason string

const (
	// ClusterQueueNotFound means the workload's ClusterQueue does not exist (yet, or any more).
	// The workload is held until the ClusterQueue is created.
	ClusterQueueNotFound PendingReason = "ClusterQueueNotFound"
	// ClusterQueueStopped means the ClusterQueue is stopped and admits nothing.
	ClusterQueueStopped PendingReason = "ClusterQueueStopped"
	// FlavorNotFound means the ClusterQueue names ResourceFlavors that do not exist
	// (ClusterQueue.MissingFlavors); it admits nothing until they are created.
	FlavorNotFound PendingReason = "FlavorNotFound"
	// UnsupportedResource means the workload requests a resource that no resource group of
	// its ClusterQueue covers. It is held until the ClusterQueue changes.
	UnsupportedResource PendingReason = "UnsupportedResource"
	// ExceedsMaxQuota means the workload does not fit in any flavor even with the whole
	// ClusterQueue and everything it may borrow free. It is held until quotas change.
	ExceedsMaxQuota PendingReason = "ExceedsMaxQuota"
	// NoMatchingFlavor means that, in some resource group, the pods' own node
	// selector or required affinity rules out every flavor: it contradicts
	// each flavor's node labels (see flavormatch.go). It is held until the
	// queue, a flavor's labels or the workload change.
	NoMatchingFlavor PendingReason = "NoMatchingFlavor"
	// InsufficientQuota means the workload does not fit now and no preemption can make it fit.
	InsufficientQuota PendingReason = "InsufficientQuota"
	// WaitingForPreemption means victims were proposed (Result.Preemptions) for this workload;
	// it is admitted once their usage is released.
	WaitingForPreemption PendingReason = "WaitingForPreemption"
	// BlockedByHead means StrictFIFO queue whose head does not fit.
	BlockedByHead PendingReason = "BlockedByHead"
	// ReservedForHead means BestEffortFIFO queue whose head has been skipped past too often;
	// the queue reserves the flavors/resources the head needs, and this workload would
	// use some of them.
	ReservedForHead PendingReason = "ReservedForHead"
	// UnknownTopologyLevel means the workload's topology level is not a level of its
	// flavor. It is held until the flavor or the workload changes.
	UnknownTopologyLevel PendingReason = "UnknownTopologyLevel"
	// TopologyUnavailable means quota fits, but no domain of the requested level has
	// free capacity for every pod of the gang.
	TopologyUnavailable PendingReason = "TopologyUnavailable"
	// ProvisioningBackoff means the workload's last capacity booking failed and it
	// waits for Booking.RetryAfter before the next attempt.
	ProvisioningBackoff PendingReason = "ProvisioningBackoff"
	// ExceedsDomainCapacity means no domain of the requested level could ever hold
	// the whole gang: not with every node empty, not with every pool at its
	// maximum. It is held until the cluster's nodes, pools or flavors change.
	ExceedsDomainCapacity PendingReason = "ExceedsDomainCapacity"
)

// NeedsChange reports whether a workload pending for r can never be
// admitted as things are: no release of quota or capacity lets it in, only
// a change to its queue, its flavor, the cluster's nodes and pools, or the
// workload itself.
func (r PendingReason) NeedsChange() bool {
	switch r {
	case ClusterQueueNotFound, FlavorNotFound, UnsupportedResource, ExceedsMaxQuota, NoMatchingFlavor, UnknownTopologyLevel, ExceedsDomainCapacity:
		return true
	case Deactivated, LocalQueueNotFound, LocalQueueStopped, NamespaceNotAllowed, HeadroomNotAllowed, PriorityClassNotAllowed:
		return true
	}
	return false
}

// PendingReasons lists every PendingReason, for callers that map them.
func PendingReasons() []PendingReason {
	return []PendingReason{ClusterQueueNotFound, ClusterQueueStopped, FlavorNotFound, UnsupportedResource, ExceedsMaxQuota, InsufficientQuota,
		WaitingForPreemption, BlockedByHead, ReservedForHead, UnknownTopologyLevel, TopologyUnavailable, ProvisioningBackoff,
		ExceedsDomainCapacity, Deactivated, LocalQueueNotFound, LocalQueueStopped, NamespaceNotAllowed, HeadroomNotAllowed,
		PriorityClassNotAllowed, NoMatchingFlavor}
}

// PreemptionReason says which rule selected a victim.
type PreemptionReason string

const (
	// InClusterQueue means the victim has lower priority (or equal priority and is newer) in
	// the preemptor's own ClusterQueue.
	InClusterQueue PreemptionReason = "InClusterQueue"
	// InCohortReclamation means the victim's ClusterQueue borrows quota that the preemptor's
	// ClusterQueue lent and now reclaims (the preemptor stays within its nominal quota).
	InCohortReclamation PreemptionReason = "InCohortReclamation"
	// InCohortFairSharing means the victim's ClusterQueue is above its fair share and stays
	// above the preemptor's after the preemption.
	InCohortFairSharing PreemptionReason = "InCohortFairSharing"
)

// Result is what one Cycle decided. It is a plain value; the caller applies it.
type Result struct {
	// Admitted in admission order. The engine already counts them as admitted (assumed):
	// the caller persists each and calls Rollback for any it could not persist.
	Admitted []Admitted
	// Preemptions are victims the caller must evict. The engine keeps their usage until
	// they are re-upserted without Admission or deleted.
	Preemptions []Preemption
	// Pending holds only pending workloads evaluated in this cycle whose reason or
	// message changed since last reported, so status is written once per change.
	Pending []PendingUpdate
	// Bookings are decisions about capacity bookings, in key order: the caller
	// writes each and confirms it by upserting the workload with the record it
	// wrote, or calls Rollback.
	Bookings []BookingDecision
	// Evictions are admitted workloads to evict for a reason other than a
	// preemption or a failed booking, in key order (see evictions.go). Empty,
	// it is left out of a Result's JSON, as are the other lists added after it.
	Evictions []Eviction `json:",omitempty"`
}

// Admitted is one admission decision.
type Admitted struct {
	// Key of the admitted workload.
	Key WorkloadKey
	// Admission to persist in the workload's status.
	Admission Admission
}

// Preemption asks the caller to evict Victim so that Preemptor can be admitted.
type Preemption struct {
	// Victim to evict.
	Victim WorkloadKey
	// Preemptor the eviction makes room for.
	Preemptor WorkloadKey
	// Reason is the rule that selected the victim.
	Reason PreemptionReason
	// Message is human-readable and deterministic. It names Preemptor,
	// and no other workload.
	Message string
}

// RedactedMessage is Message as the victim's namespace may read it
// (Redact): the Workload's Evicted condition, the job's events and the
// gang's notifications carry it.
func (p Preemption) RedactedMessage() string {
	return Redact(p.Message, []WorkloadKey{p.Preemptor}, p.Victim.Namespace)
}

// PendingUpdate is a changed pending status for one workload.
type PendingUpdate struct {
	// Key of the pending workload.
	Key WorkloadKey
	// Reason is a stable identifier.
	Reason PendingReason
	// Message is human-readable and deterministic; it never includes the queue position.
	Message string
	// BookingFlavor qualifies TopologyUnavailable: the flavor the gang waits
	// for books capacity, and neither its nodes nor its CapacityPools take
	// the gang now, so no booking is made — its pools are at their maximum,
	// or none creates a node that holds a gang that must fit one node. A
	// caller that expects the autoscaler to be asked can say why it is not.
	BookingFlavor bool `json:",omitempty"`
	// Mentions are the other workloads Message names — the StrictFIFO head
	// it waits behind, the head it leaves reserved resources to, the
	// victims it waits for — so that RedactedMessage can leave those of
	// other namespaces out. They restate what Message holds, so a Result's
	// JSON, a record of what was decided, leaves them out.
	Mentions []WorkloadKey `json:"-"`
}

// RedactedMessage is Message as the workload's own namespace may read it
// (Redact): its Workload's conditions and the events on it and its job
// carry it.
func (u PendingUpdate) RedactedMessage() string {
	return Redact(u.Message, u.Mentions, u.Key.Namespace)
}

// Shortfall is how much of one resource one flavor lacks for a workload.
type Shortfall struct {
	// Flavor tried.
	Flavor string
	// Resource short.
	Resource ResourceName
	// Requested by the whole workload (all pod sets, all pods).
	Requested int64
	// Available to the workload's ClusterQueue now (own unused quota and borrowable).
	Available int64
}

// FairShare is a ClusterQueue's fair-share standing.
type FairShare struct {
	// Cohort of the ClusterQueue ("" if none).
	Cohort string
	// Weight in milli-units.
	Weight int64
	// DominantResourceShare means the largest borrowed/lendable ratio over the queue's
	// flavor/resources, in parts per billion, divided by the weight (×1000). 0 when the
	// queue does not borrow; math.MaxInt64 when a weight-0 queue borrows.
	DominantResourceShare int64
	// TenantsAhead is how many ClusterQueues with pending work are served before this
	// one in the fair-share order.
	TenantsAhead int
}

// PreemptionPlan says what admitting a workload by preemption would need.
type PreemptionPlan struct {
	// Possible is true when some set of victims allowed by the policy makes room.
	Possible bool
	// Victims that would be preempted, in selection order.
	Victims []Preemption
	// Message explains the plan or why preemption is not possible.
	Message string
}

// Explanation says why a pending workload is not admitted.
type Explanation struct {
	// Position in its ClusterQueue's order (0 = head).
	Position int
	// Reason and Message as they would be reported now.
	Reason  PendingReason
	Message string
	// Shortfalls per flavor tried for each resource that does not fit.
	Shortfalls []Shortfall
	// FairShare standing of the workload's ClusterQueue.
	FairShare FairShare
	// Preemption would be needed to admit it now.
	Preemption PreemptionPlan
	// Mentions are the other workloads the explanation names — in its
	// messages (the StrictFIFO head it waits behind, the head it leaves
	// reserved resources to, the victims it waits for, the preemptor of its
	// queue that its own preemption waits for) or as preemption victims —
	// so that a caller showing it to someone who may not see every
	// namespace can redact them (Redact).
	Mentions []WorkloadKey
}
