package admission

import (
	"fmt"
	"maps"
	"slices"
)

// Eligibility: whether a workload may be queued at all is the engine's
// decision, like whether it fits. The caller resolves the API objects into
// plain facts on the Workload (Inactive, LocalQueueState, NamespaceRefusal);
// a pending workload they rule out is held out of every queue, as if deleted,
// and its reason is reported once in Result.Pending. A workload that was
// admitted is never dequeued by them: only a drain or its deactivation evicts
// it (see evictions.go).

// Pending reasons of workloads that cannot be queued at all. Their strings are
// the API's reasons.
const (
	// Deactivated means the workload is inactive (Workload.Inactive).
	Deactivated PendingReason = "Deactivated"
	// LocalQueueNotFound means the workload's LocalQueue does not exist.
	LocalQueueNotFound PendingReason = "LocalQueueNotFound"
	// LocalQueueStopped means the workload's LocalQueue is stopped.
	LocalQueueStopped PendingReason = "LocalQueueStopped"
	// NamespaceNotAllowed means the workload's ClusterQueue does not select its namespace.
	NamespaceNotAllowed PendingReason = "NamespaceNotAllowed"
	// HeadroomNotAllowed means the workload's pods tolerate the headroom
	// taint of another ClusterQueue (Workload.ForeignHeadroom).
	HeadroomNotAllowed PendingReason = "HeadroomNotAllowed"
	// PriorityClassNotAllowed means the workload takes its priority from a
	// PriorityClass its LocalQueue does not let it use
	// (Workload.PriorityClassRefused).
	PriorityClassNotAllowed PendingReason = "PriorityClassNotAllowed"
)

// Unqueueable reports whether r is the reason of a workload that cannot be queued
// at all, which the engine holds out of every queue.
func (r PendingReason) Unqueueable() bool {
	switch r {
	case Deactivated, LocalQueueNotFound, LocalQueueStopped, NamespaceNotAllowed, HeadroomNotAllowed, PriorityClassNotAllowed:
		return true
	}
	return false
}

// LocalQueueState is the state of a workload's LocalQueue, as far as it decides
// whether the workload may be queued or must be evicted.
type LocalQueueState string

const (
	// LocalQueueOpen (the zero value) means the LocalQueue exists and queues.
	LocalQueueOpen LocalQueueState = ""
	// LocalQueueMissing means the LocalQueue does not exist.
	LocalQueueMissing LocalQueueState = "Missing"
	// LocalQueueHold means the LocalQueue is stopped (stopPolicy Hold): its pending
	// workloads are held; its admitted ones keep running.
	LocalQueueHold LocalQueueState = "Hold"
	// LocalQueueHoldAndDrain means the LocalQueue is stopped and drained: its pending
	// workloads are held and its admitted ones evicted.
	LocalQueueHoldAndDrain LocalQueueState = "HoldAndDrain"
)

// NamespaceRefusal says why a ClusterQueue does not accept a workload's namespace.
type NamespaceRefusal string

const (
	// NamespaceSelected (the zero value) means the ClusterQueue selects the namespace.
	NamespaceSelected NamespaceRefusal = ""
	// NamespaceNoSelector means the ClusterQueue has no namespaceSelector, which
	// selects no namespace.
	NamespaceNoSelector NamespaceRefusal = "NoSelector"
	// NamespaceNotSelected means the ClusterQueue's namespaceSelector does not match
	// the namespace.
	NamespaceNotSelected NamespaceRefusal = "NotSelected"
)

// QueueNameLabel is the label that names a workload's LocalQueue, as messages
// tell users to set it (the API's berth.dev/queue-name).
const QueueNameLabel = "berth.dev/queue-name"

// NotAllowedMessage says why ClusterQueue clusterQueue refuses namespace and who can
// change that; "" when it does not refuse it.
func NotAllowedMessage(r NamespaceRefusal, clusterQueue, namespace string) string {
	switch r {
	case NamespaceNoSelector:
		return fmt.Sprintf("ClusterQueue %q has no namespaceSelector, which selects no namespace: "+
			"its administrator sets one that matches namespace %q ({} for every namespace), or use another LocalQueue", clusterQueue, namespace)
	case NamespaceNotSelected:
		return fmt.Sprintf("ClusterQueue %q does not accept workloads from namespace %q: "+
			"its administrator changes its namespaceSelector, or use another LocalQueue", clusterQueue, namespace)
	}
	return ""
}

// Unqueueable says why a pending workload cannot be queued at all, and what to fix;
// "" when it can be. The facts are looked at in the order a user fixes them:
// the workload itself, its LocalQueue, then its ClusterQueue's namespaces.
func (w *Workload) Unqueueable() (PendingReason, string) {
	k := w.Key
	switch {
	case w.Inactive:
		return Deactivated, fmt.Sprintf("the Workload is deactivated (spec.active is false); it waits until activated: kubectl berth activate workload %s -n %s",
			k.Name, k.Namespace)
	case w.LocalQueueState == LocalQueueMissing:
		return LocalQueueNotFound, fmt.Sprintf("LocalQueue %q does not exist in namespace %q: create it, or set the %s label to an existing LocalQueue",
			w.LocalQueue, k.Namespace, QueueNameLabel)
	case w.LocalQueueState == LocalQueueHold || w.LocalQueueState == LocalQueueHoldAndDrain:
		return LocalQueueStopped, fmt.Sprintf("LocalQueue %q is stopped (stopPolicy %s); its workloads wait until it is resumed: kubectl berth resume localqueue %s -n %s",
			w.LocalQueue, w.LocalQueueState, w.LocalQueue, k.Namespace)
	case w.PriorityClassRefused != "":
		return PriorityClassNotAllowed, PriorityClassMessage(w.LocalQueue, k.Namespace, w.PriorityClassRefused, w.Priority)
	case w.NamespaceRefusal != NamespaceSelected:
		return NamespaceNotAllowed, NotAllowedMessage(w.NamespaceRefusal, w.ClusterQueue, k.Namespace)
	case w.ForeignHeadroom != "":
		return HeadroomNotAllowed, ForeignHeadroomMessage(w.ForeignHeadroom, w.ClusterQueue)
	}
	return "", ""
}

// PriorityClassMessage says why a workload of LocalQueue localQueue in
// namespace cannot take its priority from PriorityClass class of value
// value, and who can change that.
func PriorityClassMessage(localQueue, namespace, class string, value int32) string {
	return fmt.Sprintf("LocalQueue %q of namespace %q does not let its workloads take PriorityClass %q (value %d): "+
		"name a class of value 0 or less, or none, or ask the platform team to list %q in the LocalQueue's spec.priorityClasses",
		localQueue, namespace, class, value, class)
}

// HeadroomTaintKey is the taint that keeps a ClusterQueue's headroom nodes
// for its own replicas (the API's berth.dev/headroom; value: the
// ClusterQueue's name).
const HeadroomTaintKey = "berth.dev/headroom"

// AnyHeadroom is Workload.ForeignHeadroom for pods that tolerate the
// headroom taint whatever its value.
const AnyHeadroom = "*"

// ForeignHeadroomMessage says why pods that tolerate the headroom taint of
// ClusterQueue foreign (AnyHeadroom: of every one) cannot be queued in
// clusterQueue, and what to fix.
func ForeignHeadroomMessage(foreign, clusterQueue string) string {
	own := fmt.Sprintf("pods queued in ClusterQueue %q may tolerate only %s=%s: remove that toleration, or tolerate the taints the job needs by key and value",
		clusterQueue, HeadroomTaintKey, clusterQueue)
	if foreign == AnyHeadroom {
		return fmt.Sprintf("the pods tolerate the taint %s whatever its value (a toleration with operator Exists and that key or no key), "+
			"so they could take the headroom nodes every ClusterQueue keeps for its own replicas; %s", HeadroomTaintKey, own)
	}
	return fmt.Sprintf("the pods tolerate the taint %s=%s, which keeps ClusterQueue %q's headroom nodes for its own replicas; %s",
		HeadroomTaintKey, foreign, foreign, own)
}

// heldNote is the reason a workload that cannot be queued was last given.
type heldNote struct {
	reason  PendingReason
	message string
}

// eligibility holds the pending workloads that cannot be queued at all: they are
// in no queue and count nowhere, and each reason is reported once.
type eligibility struct {
	held map[WorkloadKey]heldNote
	// dirty are the held workloads whose reason is not reported yet.
	dirty map[WorkloadKey]struct{}
}

func newEligibility() *eligibility {
	return &eligibility{held: map[WorkloadKey]heldNote{}, dirty: map[WorkloadKey]struct{}{}}
}

// hold takes a pending workload that cannot be queued out of every queue —
// drop deletes it from the engine, which forgets its note too — and notes its
// reason, to be reported by the next Cycle when it changed.
func (elig *eligibility) hold(key WorkloadKey, reason PendingReason, msg string, drop func(WorkloadKey)) {
	prev, was := elig.held[key]
	_, unreported := elig.dirty[key]
	drop(key)
	n := heldNote{reason: reason, message: msg}
	elig.held[key] = n
	if !was || prev != n || unreported {
		elig.dirty[key] = struct{}{}
	}
}

// forget drops a workload's held note: it can be queued, or it is gone.
func (elig *eligibility) forget(key WorkloadKey) {
	delete(elig.held, key)
	delete(elig.dirty, key)
}

// report adds the held workloads whose reason changed to res, in key order.
func (elig *eligibility) report(res *Result) {
	if len(elig.dirty) == 0 {
		return
	}
	for _, k := range slices.SortedFunc(maps.Keys(elig.dirty), cmpKey) {
		n := elig.held[k]
		res.Pending = append(res.Pending, PendingUpdate{Key: k, Reason: n.reason, Message: n.message})
	}
	clear(elig.dirty)
}

// Held reports whether a pending workload is held because it cannot be queued at
// all, with its reason.
func (e *Engine) Held(key WorkloadKey) (PendingReason, bool) {
	n, ok := e.elig.held[key]
	return n.reason, ok
}
