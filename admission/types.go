package admission

// ResourceName names a resource, for example "cpu", "memory" or "nvidia.com/gpu".
type ResourceName string

// Resources maps a resource to an amount in milli-units of that resource (what
// resource.Quantity.MilliValue returns): 1 GPU is 1000, 512Mi of memory is 536870912000.
type Resources map[ResourceName]int64

// MaxAmount is the largest amount (in milli-units) accepted anywhere: in a quota, a
// per-pod request, or a workload's total (count × request). Larger values are rejected
// as invalid input so that the engine's sums cannot overflow int64.
const MaxAmount int64 = 1 << 60

// QueueingStrategy says how a ClusterQueue treats a pending head that does not fit.
type QueueingStrategy string

const (
	// StrictFIFO means the head of the queue blocks everything behind it until it is admitted.
	StrictFIFO QueueingStrategy = "StrictFIFO"
	// BestEffortFIFO means a head that does not fit does not block smaller work behind it. To
	// keep the head from starving, once it has been skipped past in
	// Options.StarvationSkips cycles (or for Options.StarvationAge), the queue reserves
	// for it: nothing behind it that would use a flavor/resource it needs is admitted.
	BestEffortFIFO QueueingStrategy = "BestEffortFIFO"
)

// PreemptionMode says which admitted workloads a pending workload may preempt.
type PreemptionMode string

const (
	// PreemptNever never preempts.
	PreemptNever PreemptionMode = "Never"
	// PreemptLowerPriority preempts workloads of strictly lower priority.
	PreemptLowerPriority PreemptionMode = "LowerPriority"
	// PreemptLowerOrNewerEqualPriority preempts workloads of lower priority, or of equal
	// priority created strictly later. Only valid for PreemptionPolicy.WithinClusterQueue.
	PreemptLowerOrNewerEqualPriority PreemptionMode = "LowerOrNewerEqualPriority"
	// PreemptAny preempts workloads of any priority. Only valid for cohort-level modes.
	PreemptAny PreemptionMode = "Any"
)

// PreemptionPolicy says whom the pending workloads of a ClusterQueue may preempt. The
// empty mode means PreemptNever, except for FairSharing (see there).
type PreemptionPolicy struct {
	// WithinClusterQueue means Never | LowerPriority | LowerOrNewerEqualPriority. Victims are
	// admitted workloads of the same ClusterQueue.
	WithinClusterQueue PreemptionMode
	// ReclaimWithinCohort means Never | LowerPriority | Any. Victims are admitted workloads of
	// other ClusterQueues in the cohort that borrow; allowed only when the preemptor,
	// once admitted, stays within its own nominal quota (it takes back what it lent).
	ReclaimWithinCohort PreemptionMode
	// FairSharing means Never | LowerPriority | Any; "" means "same as ReclaimWithinCohort".
	// Used only when Options.FairSharing is on. Victims are admitted workloads of other
	// borrowing ClusterQueues in the cohort whose dominant resource share, after the
	// preemption, stays strictly above the preemptor queue's share after admission.
	// The strict inequality is what rules out preemption loops (see docs/admission.md).
	FairSharing PreemptionMode
}

// Quota is the quota of one resource in one flavor of a ClusterQueue.
type Quota struct {
	// Nominal is the quota the ClusterQueue is entitled to.
	Nominal int64
	// BorrowingLimit caps how much above Nominal the ClusterQueue may use by borrowing
	// from its cohort. nil: no limit. Must be nil or 0 without a cohort.
	BorrowingLimit *int64
	// LendingLimit caps how much of Nominal other ClusterQueues in the cohort may borrow.
	// nil: all of Nominal may be lent. Values above Nominal count as Nominal.
	LendingLimit *int64
}

// FlavorQuotas is the quota of one flavor for the resources of a ResourceGroup.
type FlavorQuotas struct {
	// Flavor is the ResourceFlavor name.
	Flavor string
	// Resources must have exactly one entry per covered resource of the group.
	Resources map[ResourceName]Quota
	// NodeLabels are the flavor's node labels: every node of the flavor
	// carries them, and a pod set whose own node constraints contradict
	// them is not admitted on the flavor (see flavormatch.go). They come
	// with the queue, so that a queue never admits on a flavor whose labels
	// the engine has not been told.
	NodeLabels map[string]string
}

// ResourceGroup is a set of resources that are assigned one flavor together (e.g. GPUs,
// CPU and memory of a GPU node type). Flavors are tried in order.
type ResourceGroup struct {
	// CoveredResources are the resources of this group; a resource may be covered by at
	// most one group of a ClusterQueue.
	CoveredResources []ResourceName
	// Flavors are tried in this order (see docs/admission.md, "Flavor choice").
	Flavors []FlavorQuotas
}

// ClusterQueue is the engine's view of a ClusterQueue: a tenant with quota.
type ClusterQueue struct {
	// Name is unique among ClusterQueues.
	Name string
	// Cohort groups ClusterQueues that lend and borrow unused quota. "" = no cohort.
	Cohort string
	// ResourceGroups hold the quota.
	ResourceGroups []ResourceGroup
	// QueueingStrategy means StrictFIFO or BestEffortFIFO. "" means BestEffortFIFO.
	QueueingStrategy QueueingStrategy
	// Preemption says whom this queue's pending workloads may preempt.
	Preemption PreemptionPolicy
	// FairShareWeight in milli-units: 1000 = weight 1. 0 is allowed: the queue then
	// only borrows what nobody with a positive weight wants.
	FairShareWeight int64
	// Stopped holds pending workloads (admits nothing); admitted workloads stay.
	Stopped bool
	// Drain evicts the queue's admitted workloads (stopPolicy HoldAndDrain); it
	// comes with Stopped.
	Drain bool
	// MissingFlavors names the flavors the queue's quota is in that do not exist.
	// A queue with any is held like a stopped one, and its pending workloads are
	// told (FlavorNotFound) which flavors to create: the nodes a missing flavor
	// would select are unknown, so nothing can be admitted on it.
	MissingFlavors []string
}

// held reports whether the queue admits nothing.
func (q *ClusterQueue) held() bool { return q.Stopped || len(q.MissingFlavors) > 0 }

// WorkloadKey identifies a workload. It is unique and is the last tie-breaker of every
// ordering in the engine.
type WorkloadKey struct{ Namespace, Name string }

// String returns "namespace/name".
func (k WorkloadKey) String() string { return k.Namespace + "/" + k.Name }

// PodSet is a group of identical pods of a workload.
type PodSet struct {
	// Name is unique within the workload.
	Name string
	// Count is the number of pods (≥ 1). The gang is admitted whole or not at all.
	Count int32
	// Requests is per pod, already including init containers and pod overhead.
	Requests Resources
	// Nodes narrows the nodes of the flavor the pods may be bound to (their
	// own node selector and affinity); nil: any. See constraints.go.
	Nodes NodeFilter
	// Apart names the pod sets of the workload whose pods these pods must
	// not share a node with — its own name for one pod per node (required
	// pod anti-affinity on the hostname among the gang's pods).
	Apart []string
	// Tolerations are the pods' own; those of the flavor the pod set is
	// placed on are added to them (see taints.go).
	Tolerations []Toleration
}

// Workload is one gang: every pod of every pod set is admitted together or not at all.
type Workload struct {
	// Key identifies the workload.
	Key WorkloadKey
	// UID is carried through for the caller; the engine does not interpret it.
	UID string
	// ClusterQueue is the queue the workload's LocalQueue points at.
	ClusterQueue string
	// LocalQueue is the name of the workload's LocalQueue, in the workload's
	// namespace. With Options.LocalQueueFairSharing it is the flow the workload is
	// shared under; otherwise it is only carried for diagnostics.
	LocalQueue string
	// LocalQueueWeight is the LocalQueue's fair-sharing weight in milli-units when
	// the workload was queued (1000 = weight 1; 0 means 1000). Used only with
	// Options.LocalQueueFairSharing: a LocalQueue of weight 2 gets twice the turns of
	// one of weight 1 among workloads of equal priority.
	LocalQueueWeight int64
	// Priority means higher first.
	Priority int32
	// CreationTime in unix nanoseconds: earlier first among equal priority.
	CreationTime int64
	// PodSets are the pods of the gang.
	PodSets []PodSet
	// Admission non-nil: the workload is admitted (for example rebuilt after a controller
	// restart, or the confirmation of an admission returned by Cycle). It counts as usage
	// and is never admitted again.
	Admission *Admission
	// Topology, when set, asks for the whole gang in one topology domain (see
	// topology.go).
	Topology *TopologyRequest
	// Booking is the workload's booking record (nil: it never booked capacity).
	// A pending workload whose booking failed is not admitted before
	// Booking.RetryAfter, and avoids Booking.FailedDomains while another domain
	// can take it; an admitted one's decisions follow it (see booking.go).
	Booking *Booking
	// Generation of the spec: an admission carries the generation it was decided
	// for, so that the caller does not write it onto a changed spec.
	Generation int64
	// AdmissionTime (unix nanoseconds) of an admitted workload, used to pick the most
	// recently admitted victims first. 0 when unknown (counts as oldest).
	AdmissionTime int64
	// Inactive: the workload is deactivated. Pending, it is held (Deactivated);
	// admitted, it is evicted (see evictions.go).
	Inactive bool
	// LocalQueueState is the state of its LocalQueue: missing or stopped, a
	// pending workload is held; drained, an admitted one is evicted.
	LocalQueueState LocalQueueState
	// NamespaceRefusal says that its ClusterQueue does not accept its namespace:
	// a pending workload is held (NamespaceNotAllowed). Admitted ones keep
	// running: their quota was granted under the selector of the time.
	NamespaceRefusal NamespaceRefusal
	// ForeignHeadroom is the ClusterQueue whose headroom taint its pods
	// tolerate when that is not its own ClusterQueue (AnyHeadroom: every
	// one's): a pending workload is held (HeadroomNotAllowed), so that
	// borrowers cannot take the nodes another queue keeps warm.
	ForeignHeadroom string
	// PriorityClassRefused names the PriorityClass the workload takes its
	// priority from when its LocalQueue does not let it (a class of value
	// above 0 that the LocalQueue does not list): a pending workload is held
	// (PriorityClassNotAllowed), so that no tenant orders itself ahead of,
	// or preempts, the workloads of another with a class the platform did
	// not grant it.
	PriorityClassRefused string
	// Evicting: an eviction of the admitted workload is written and under way;
	// no other is decided for it.
	Evicting bool
}

// PodSetAssignment is the flavor chosen for each resource of one pod set.
type PodSetAssignment struct {
	// Name of the pod set.
	Name string
	// Count of pods admitted (always the whole pod set).
	Count int32
	// Flavors maps each requested resource to the flavor it is charged to.
	Flavors map[ResourceName]string
}

// Admission is the quota reservation of an admitted workload.
type Admission struct {
	// ClusterQueue charged with the usage.
	ClusterQueue string
	// PodSets has one assignment per pod set, in the workload's pod set order.
	PodSets []PodSetAssignment
	// Topology is the domain the gang was placed in (nil: not pinned).
	Topology *TopologyAssignment
	// Provisioning is the capacity the admission books before the gang may start
	// (nil: none). It stays once provisioned: the new nodes stay reserved until
	// they exist.
	Provisioning *ProvisioningPlan
	// Generation is the workload's spec generation the admission was decided for.
	Generation int64
}
