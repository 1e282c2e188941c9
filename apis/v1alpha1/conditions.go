package v1alpha1

// Workload condition types. What each condition says, and with which
// reasons, is decided in one place (controllers/lifecycle) from the
// workload's phase; the reasons are the WorkloadReason constants below.
//
//   - QuotaReserved: True (QuotaReserved) while the workload holds quota,
//     whether or not its capacity is confirmed yet. False while it waits,
//     with the reason it is not admitted (a pending reason, Pending after a
//     requeue, ProvisioningFailed or ProvisioningGaveUp after a failed
//     booking).
//   - Admitted: True (Admitted) once the gang may start. False with
//     Pending (waiting for quota), WaitingForCapacity (quota reserved, a
//     ProvisioningRequest books the capacity), Evicted (being stopped),
//     Requeued, ProvisioningFailed or ProvisioningGaveUp.
//   - Evicted: True while berth takes an admitted workload back (Preempted,
//     ClusterQueueStopped, CapacityRevoked, BookingExpired, PodsNotReady,
//     Resized), and with Requeued once its pods are gone and it waits
//     again. False (Admitted, WaitingForCapacity) once admitted again.
//   - Finished: True (Succeeded or Failed) when the job ended.
//   - PodsHeld: True (PodsHeld) while pods that claim the gang stay gated
//     because its pod sets already run every pod the admission counts, or
//     because they are not the gang's own (extra members of a pod group);
//     absent otherwise.
//   - PodsReady: True (PodsReady) when every pod of a gang admitted on
//     booked capacity was Ready in time; False (PodsNotReady) when they
//     were not and the gang was evicted.
//
// The conditions are written with the phase's status fields in one status
// patch: admission, provisioning and conditions never disagree.
const (
	ConditionQuotaReserved = "QuotaReserved"
	ConditionAdmitted      = "Admitted"
	ConditionEvicted       = "Evicted"
	ConditionFinished      = "Finished"
	ConditionPodsReady     = "PodsReady"
	ConditionPodsHeld      = "PodsHeld"
)

// WorkloadReason is the reason of a Workload condition.
type WorkloadReason string

// Reasons of QuotaReserved and Admitted.
const (
	// ReasonQuotaReserved (QuotaReserved=True): the workload holds quota.
	ReasonQuotaReserved WorkloadReason = "QuotaReserved"
	// ReasonAdmitted (Admitted=True, Evicted=False): the gang may start.
	ReasonAdmitted WorkloadReason = "Admitted"
	// ReasonPending (Admitted=False; QuotaReserved=False after a requeue):
	// the workload waits for quota; QuotaReserved's reason says why.
	ReasonPending WorkloadReason = "Pending"
	// ReasonWaitingForCapacity (Admitted=False, Evicted=False): quota is
	// reserved and a ProvisioningRequest books the gang's capacity; the job
	// starts once it is provisioned.
	ReasonWaitingForCapacity WorkloadReason = "WaitingForCapacity"
	// ReasonEvicted (Admitted=False): the workload still holds quota while
	// its job is stopped; Evicted's reason says why.
	ReasonEvicted WorkloadReason = "Evicted"
	// ReasonProvisioningFailed (QuotaReserved=False, Admitted=False): a
	// booking failed; the quota was released and the next attempt waits
	// for status.provisioning.retryAfter, in another domain where one can
	// take the gang.
	ReasonProvisioningFailed WorkloadReason = "ProvisioningFailed"
	// ReasonProvisioningGaveUp (QuotaReserved=False, Admitted=False):
	// maxAttempts bookings failed in a row; the workload is not queued
	// again until its Workload is deleted (the job's controller creates a
	// new one).
	ReasonProvisioningGaveUp WorkloadReason = "ProvisioningGaveUp"
)

// Reasons of QuotaReserved=False that say why a workload is not admitted.
// Those marked actionable need someone to change the workload or its
// queues and are written at once with a warning event; the others only
// say the workload waits its turn and are written only once it waited
// --pending-status-delay, never by default (the visibility API serves them).
const (
	// ReasonLocalQueueNotFound (actionable): the LocalQueue does not exist.
	ReasonLocalQueueNotFound WorkloadReason = "LocalQueueNotFound"
	// ReasonClusterQueueNotFound (actionable): the LocalQueue's ClusterQueue
	// does not exist.
	ReasonClusterQueueNotFound WorkloadReason = "ClusterQueueNotFound"
	// ReasonClusterQueueStopped (actionable; also Evicted=True): the
	// ClusterQueue is stopped.
	ReasonClusterQueueStopped WorkloadReason = "ClusterQueueStopped"
	// ReasonLocalQueueStopped (actionable; also Evicted=True): the
	// workload's LocalQueue is stopped.
	ReasonLocalQueueStopped WorkloadReason = "LocalQueueStopped"
	// ReasonDeactivated (actionable; also Evicted=True): the workload's
	// spec.active is false.
	ReasonDeactivated WorkloadReason = "Deactivated"
	// ReasonFlavorsNotFound (actionable): the ClusterQueue names
	// ResourceFlavors that do not exist, and admits nothing until they are
	// created.
	ReasonFlavorsNotFound WorkloadReason = "FlavorNotFound"
	// ReasonNamespaceNotAllowed (actionable): the ClusterQueue's
	// namespaceSelector does not select the workload's namespace.
	ReasonNamespaceNotAllowed WorkloadReason = "NamespaceNotAllowed"
	// ReasonHeadroomNotAllowed (actionable): the workload's pods tolerate
	// the headroom taint (berth.dev/headroom) of another ClusterQueue than
	// their own, or of every one.
	ReasonHeadroomNotAllowed WorkloadReason = "HeadroomNotAllowed"
	// ReasonPriorityClassNotAllowed (actionable): the workload takes its
	// priority from a PriorityClass of value above 0 that its LocalQueue
	// does not list in spec.priorityClasses.
	ReasonPriorityClassNotAllowed WorkloadReason = "PriorityClassNotAllowed"
	// ReasonInvalidSpec (actionable): the workload cannot be queued as it is.
	ReasonInvalidSpec WorkloadReason = "InvalidSpec"
	// ReasonUnsupportedResource (actionable): no resource group of the
	// ClusterQueue covers a requested resource.
	ReasonUnsupportedResource WorkloadReason = "UnsupportedResource"
	// ReasonExceedsMaxQuota (actionable): the workload does not fit even in
	// an empty ClusterQueue with everything it may borrow.
	ReasonExceedsMaxQuota WorkloadReason = "ExceedsMaxQuota"
	// ReasonNoMatchingFlavor (actionable): the pods' own node selector or
	// required node affinity contradicts the node labels of every flavor
	// that could hold a resource they request.
	ReasonNoMatchingFlavor WorkloadReason = "NoMatchingFlavor"
	// ReasonUnknownTopologyLevel (actionable): the topology level the job
	// asks for is not a level of its flavor.
	ReasonUnknownTopologyLevel WorkloadReason = "UnknownTopologyLevel"
	// ReasonExceedsDomainCapacity (actionable): no domain of the requested
	// level can ever hold the whole gang, even with every node free and
	// every CapacityPool at maxNodes.
	ReasonExceedsDomainCapacity WorkloadReason = "ExceedsDomainCapacity"
	// ReasonInsufficientQuota: the workload does not fit in the quota now
	// and no preemption can make it fit.
	ReasonInsufficientQuota WorkloadReason = "InsufficientQuota"
	// ReasonWaitingForPreemption: victims are being evicted for it.
	ReasonWaitingForPreemption WorkloadReason = "WaitingForPreemption"
	// ReasonBlockedByHead: a StrictFIFO queue's head does not fit.
	ReasonBlockedByHead WorkloadReason = "BlockedByHead"
	// ReasonReservedForHead: a BestEffortFIFO queue reserves what this
	// workload needs for a head skipped past too often.
	ReasonReservedForHead WorkloadReason = "ReservedForHead"
	// ReasonTopologyUnavailable: quota fits, but no domain of the requested
	// level has free (or bookable) capacity for every pod of the gang now.
	// On a flavor that books capacity (no ProvisioningRequest is made: its
	// pools are at maxNodes, or none creates a node that large), written at
	// once, without an event, once while the workload stays pending; on a
	// flavor that never books, like ReasonInsufficientQuota.
	ReasonTopologyUnavailable WorkloadReason = "TopologyUnavailable"
)

// Reasons of Evicted.
const (
	// ReasonPreempted (Evicted=True): evicted to make room for another
	// workload.
	ReasonPreempted WorkloadReason = "Preempted"
	// ReasonCapacityRevoked (Evicted=True): the autoscaler took the booked
	// capacity back.
	ReasonCapacityRevoked WorkloadReason = "CapacityRevoked"
	// ReasonBookingExpired (Evicted=True): the booking expired before any
	// pod of the started gang used it.
	ReasonBookingExpired WorkloadReason = "BookingExpired"
	// ReasonPodsNotReady (Evicted=True, PodsReady=False): not every pod of
	// a gang admitted on booked capacity was Ready within podsReadySeconds.
	ReasonPodsNotReady WorkloadReason = "PodsNotReady"
	// ReasonResized (Evicted=True): the job grew — more pods, or larger
	// ones — after admission; it is stopped and queued again whole.
	ReasonResized WorkloadReason = "Resized"
	// ReasonRequeued (Evicted=True, Admitted=False): the evicted job's pods
	// are gone and the workload waits for admission again.
	ReasonRequeued WorkloadReason = "Requeued"
)

// Reasons of Finished and PodsReady.
const (
	// ReasonSucceeded (Finished=True): the job succeeded.
	ReasonSucceeded WorkloadReason = "Succeeded"
	// ReasonFailed (Finished=True): the job failed.
	ReasonFailed WorkloadReason = "Failed"
	// ReasonPodsReady (PodsReady=True): every pod was Ready in time.
	ReasonPodsReady WorkloadReason = "PodsReady"
	// ReasonPodsHeld (PodsHeld=True): berth keeps pods that claim the gang
	// gated; the message names them and says why.
	ReasonPodsHeld WorkloadReason = "PodsHeld"
)

// ClusterQueue and LocalQueue conditions:
//   - Active: True (reason Ready) when the queue can admit. False with
//     ClusterQueueNotFound, NamespaceNotAllowed, Stopped, InvalidSpec,
//     FlavorNotFound.
const (
	ConditionActive = "Active"

	ReasonReady                     = "Ready"
	ReasonStopped                   = "Stopped"
	ReasonQueueInvalidSpec          = "InvalidSpec"
	ReasonFlavorNotFound            = "FlavorNotFound"
	ReasonQueueClusterQueueNotFound = "ClusterQueueNotFound"
	ReasonQueueNamespaceNotAllowed  = "NamespaceNotAllowed"
)

// ResourceFlavor condition ProvisioningAvailable: True when the cluster
// serves the ProvisioningRequest API (reason APIAvailable), False when it
// does not (APINotInstalled) — then gangs of a flavor that needs bookings
// wait.
const (
	ConditionProvisioningAvailable = "ProvisioningAvailable"

	ReasonAPIAvailable    = "APIAvailable"
	ReasonAPINotInstalled = "APINotInstalled"
)

// WorkloadFinalizer keeps a Workload, and the quota it holds, until its
// job's pods are gone or the job finished: a job deleted in the background
// or with orphan propagation does not hand its GPUs to the next job while
// its pods still run on them.
const WorkloadFinalizer = "berth.dev/resource-in-use"
