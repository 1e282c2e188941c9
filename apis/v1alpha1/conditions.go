package v1alpha1

// Condition types and reasons of berth objects.
//
// Workload conditions:
//   - QuotaReserved: True (reason QuotaReserved) while the workload holds
//     quota. False while it waits, with the reason it is not admitted:
//     LocalQueueNotFound, ClusterQueueNotFound, NamespaceNotAllowed,
//     Pending (the message says the blocking resource and shortfall).
//   - Admitted: True (reason Admitted) once the gang may start. False with
//     reason Pending or Evicted.
//   - Evicted: True (reason Preempted, ClusterQueueStopped) while berth
//     takes back an admitted workload; it stays True with reason Requeued
//     once the pods are gone and the workload waits again.
//   - Finished: True (reason Succeeded or Failed) when the job ended.
//
// ClusterQueue and LocalQueue conditions:
//   - Active: True (reason Ready) when the queue can admit. False with
//     ClusterQueueNotFound, NamespaceNotAllowed, Stopped, InvalidSpec,
//     FlavorNotFound.
const (
	ConditionQuotaReserved = "QuotaReserved"
	ConditionAdmitted      = "Admitted"
	ConditionEvicted       = "Evicted"
	ConditionFinished      = "Finished"
	ConditionActive        = "Active"

	ReasonQuotaReserved        = "QuotaReserved"
	ReasonAdmitted             = "Admitted"
	ReasonPending              = "Pending"
	ReasonLocalQueueNotFound   = "LocalQueueNotFound"
	ReasonClusterQueueNotFound = "ClusterQueueNotFound"
	ReasonNamespaceNotAllowed  = "NamespaceNotAllowed"
	ReasonPreempted            = "Preempted"
	ReasonClusterQueueStopped  = "ClusterQueueStopped"
	ReasonRequeued             = "Requeued"
	ReasonSucceeded            = "Succeeded"
	ReasonFailed               = "Failed"
	ReasonReady                = "Ready"
	ReasonStopped              = "Stopped"
	ReasonInvalidSpec          = "InvalidSpec"
	ReasonFlavorNotFound       = "FlavorNotFound"
)

// Capacity provisioning (see ProvisioningStatus).
//
//   - Admitted=False, reason WaitingForCapacity: quota is reserved and a
//     ProvisioningRequest books the gang's capacity; the job starts once it
//     is Provisioned.
//   - QuotaReserved=False, reason ProvisioningFailed: the booking failed or
//     expired; the workload waits for its retry (status.provisioning says
//     when), or, once attempts are used up, for someone to act.
//   - Evicted=True, reason CapacityRevoked or PodsNotReady: an admitted gang
//     lost its capacity, or not all its pods were Ready in time; it is
//     stopped and queued again.
//
// ResourceFlavor condition ProvisioningAvailable: True when the cluster
// serves the ProvisioningRequest API (reason APIAvailable), False when it
// does not (APINotInstalled) — then gangs of a flavor that needs bookings
// wait.
const (
	ConditionProvisioningAvailable = "ProvisioningAvailable"

	ReasonWaitingForCapacity = "WaitingForCapacity"
	ReasonProvisioningFailed = "ProvisioningFailed"
	ReasonCapacityRevoked    = "CapacityRevoked"
	ReasonPodsNotReady       = "PodsNotReady"
	ReasonAPIAvailable       = "APIAvailable"
	ReasonAPINotInstalled    = "APINotInstalled"
)
