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
