package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QueueingStrategy says how a ClusterQueue orders its pending workloads.
// +kubebuilder:validation:Enum=StrictFIFO;BestEffortFIFO
type QueueingStrategy string

const (
	// StrictFIFO admits workloads strictly in order (priority, then
	// creation time): a head that does not fit blocks everything behind it.
	StrictFIFO QueueingStrategy = "StrictFIFO"
	// BestEffortFIFO lets smaller work behind a head that does not fit be
	// admitted, while still guaranteeing that the head eventually runs.
	BestEffortFIFO QueueingStrategy = "BestEffortFIFO"
)

// PreemptionMode says which admitted workloads may be preempted.
// +kubebuilder:validation:Enum=Never;LowerPriority;LowerOrNewerEqualPriority;Any
type PreemptionMode string

const (
	// PreemptNever never preempts.
	PreemptNever PreemptionMode = "Never"
	// PreemptLowerPriority preempts only workloads of lower priority.
	PreemptLowerPriority PreemptionMode = "LowerPriority"
	// PreemptLowerOrNewerEqualPriority also preempts workloads of equal
	// priority that were created later.
	PreemptLowerOrNewerEqualPriority PreemptionMode = "LowerOrNewerEqualPriority"
	// PreemptAny preempts any workload that borrows quota, whatever its
	// priority (only for reclaiming lent quota).
	PreemptAny PreemptionMode = "Any"
)

// StopPolicy says whether a ClusterQueue or a LocalQueue is stopped.
// +kubebuilder:validation:Enum=None;Hold;HoldAndDrain
type StopPolicy string

const (
	// StopPolicyNone means the queue admits as usual.
	StopPolicyNone StopPolicy = "None"
	// StopPolicyHold means the queue admits nothing new; admitted work keeps running.
	StopPolicyHold StopPolicy = "Hold"
	// StopPolicyHoldAndDrain means the queue admits nothing new and evicts what
	// it has admitted.
	StopPolicyHoldAndDrain StopPolicy = "HoldAndDrain"
)

// ResourceQuota is the quota of one resource in one flavor. Quantities must
// not be negative and lendingLimit must not exceed nominalQuota; berth's
// validating webhook rejects what breaks these rules (CEL rules over
// quantities this deep in lists exceed the API server's cost budget).
type ResourceQuota struct {
	// name of the resource, e.g. nvidia.com/gpu, cpu, memory.
	// +required
	Name corev1.ResourceName `json:"name"`

	// nominalQuota is the amount of the resource guaranteed to this
	// ClusterQueue: its workloads can always use it (reclaiming it, if
	// lent, by preemption when the policy allows).
	// +required
	NominalQuota resource.Quantity `json:"nominalQuota"`

	// borrowingLimit is the most this ClusterQueue may borrow from unused
	// quota of its cohort on top of nominalQuota. Unset means no limit
	// other than what the cohort has unused. Requires a cohort.
	// +optional
	BorrowingLimit *resource.Quantity `json:"borrowingLimit,omitempty"`

	// lendingLimit is the most of its unused nominalQuota this ClusterQueue
	// lends to its cohort. Unset means all of it. Requires a cohort.
	// +optional
	LendingLimit *resource.Quantity `json:"lendingLimit,omitempty"`
}

// FlavorQuotas is the quota of every covered resource in one flavor.
type FlavorQuotas struct {
	// name of the ResourceFlavor.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	Name string `json:"name"`

	// resources lists the quota of each of the group's coveredResources, in
	// the same order.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Resources []ResourceQuota `json:"resources"`
}

// ResourceGroup is a set of resources that are always assigned the same
// flavor for a pod set, with the flavors to try, in order.
// +kubebuilder:validation:XValidation:rule="self.flavors.all(f, size(f.resources) == size(self.coveredResources) && f.resources.all(r, r.name in self.coveredResources))",message="each flavor must list quota for exactly the group's coveredResources"
type ResourceGroup struct {
	// coveredResources are the resources this group gives quota for.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	CoveredResources []corev1.ResourceName `json:"coveredResources"`

	// flavors are tried in this order for each workload.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Flavors []FlavorQuotas `json:"flavors"`
}

// ClusterQueuePreemption says when workloads of a ClusterQueue may preempt
// admitted ones.
type ClusterQueuePreemption struct {
	// withinClusterQueue says which workloads of the same ClusterQueue a
	// pending workload that does not fit its nominal quota may preempt:
	// Never, LowerPriority or LowerOrNewerEqualPriority.
	// +optional
	// +kubebuilder:default=Never
	// +kubebuilder:validation:XValidation:rule="self != 'Any'",message="withinClusterQueue must be Never, LowerPriority or LowerOrNewerEqualPriority"
	WithinClusterQueue PreemptionMode `json:"withinClusterQueue,omitempty"`

	// reclaimWithinCohort says which workloads of other ClusterQueues in
	// the cohort, running on quota this ClusterQueue lent, may be preempted
	// to get it back: Never, LowerPriority or Any.
	// +optional
	// +kubebuilder:default=Never
	// +kubebuilder:validation:XValidation:rule="self != 'LowerOrNewerEqualPriority'",message="reclaimWithinCohort must be Never, LowerPriority or Any"
	ReclaimWithinCohort PreemptionMode `json:"reclaimWithinCohort,omitempty"`
}

// FairSharing holds a ClusterQueue's fair-sharing parameters.
type FairSharing struct {
	// weight of this ClusterQueue in fair sharing within its cohort. A
	// queue with weight 2 is entitled to twice the borrowed share of a
	// queue with weight 1. Zero means it only gets what nobody else wants.
	// +optional
	// +kubebuilder:default="1"
	Weight *resource.Quantity `json:"weight,omitempty"`
}

// ClusterQueueSpec is the desired state of a ClusterQueue.
// +kubebuilder:validation:XValidation:rule="has(self.cohort) || !has(self.resourceGroups) || self.resourceGroups.all(g, g.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit) && !has(r.lendingLimit))))",message="borrowingLimit and lendingLimit require a cohort: set spec.cohort or remove them"
type ClusterQueueSpec struct {
	// cohort is the name of the group of ClusterQueues that lend each other
	// unused quota. Unset: the queue neither lends nor borrows.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	Cohort string `json:"cohort,omitempty"`

	// namespaceSelector selects the namespaces whose LocalQueues may submit
	// to this ClusterQueue. Unset selects no namespace, so that a queue's
	// quota is spent only by the namespaces its administrator names; empty
	// ({}) selects every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// resourceGroups give the quota, per flavor, of the resources
	// workloads in this queue request. A resource may appear in at most one
	// group. A workload requesting a resource no group covers is never
	// admitted, and its status says so.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	ResourceGroups []ResourceGroup `json:"resourceGroups,omitempty"`

	// queueingStrategy orders the pending workloads: StrictFIFO or
	// BestEffortFIFO (default).
	// +optional
	// +kubebuilder:default=BestEffortFIFO
	QueueingStrategy QueueingStrategy `json:"queueingStrategy,omitempty"`

	// preemption says when pending workloads may preempt admitted ones.
	// +optional
	Preemption ClusterQueuePreemption `json:"preemption,omitempty"`

	// fairSharing holds this queue's weight in fair sharing in its cohort.
	// +optional
	FairSharing FairSharing `json:"fairSharing,omitempty"`

	// stopPolicy stops the queue: None (default), Hold or HoldAndDrain.
	// +optional
	// +kubebuilder:default=None
	StopPolicy StopPolicy `json:"stopPolicy,omitempty"`
}

// ResourceUsage is how much of one resource is in use.
type ResourceUsage struct {
	// name of the resource.
	// +required
	Name corev1.ResourceName `json:"name"`
	// total in use by admitted workloads.
	// +required
	Total resource.Quantity `json:"total"`
	// borrowed is the part of total above nominal quota.
	// +optional
	Borrowed resource.Quantity `json:"borrowed,omitempty"`
}

// FlavorUsage is the usage of every resource in one flavor.
type FlavorUsage struct {
	// name of the flavor.
	// +required
	Name string `json:"name"`
	// resources in use.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Resources []ResourceUsage `json:"resources"`
}

// ClusterQueueStatus is the observed state of a ClusterQueue.
type ClusterQueueStatus struct {
	// conditions: Active says whether the queue can admit workloads.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// pendingWorkloads is the number of workloads waiting for admission.
	// +optional
	PendingWorkloads int32 `json:"pendingWorkloads,omitempty"`

	// admittedWorkloads is the number of workloads holding quota.
	// +optional
	AdmittedWorkloads int32 `json:"admittedWorkloads,omitempty"`

	// flavorsUsage is the quota in use, per flavor.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	FlavorsUsage []FlavorUsage `json:"flavorsUsage,omitempty"`
}

// ClusterQueue is a tenant's quota: how much of which flavors its workloads
// may use, how they are ordered, and what it lends to and borrows from its
// cohort.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=bcq,categories=berth
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cohort",type=string,JSONPath=`.spec.cohort`
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=`.spec.queueingStrategy`,priority=1
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pendingWorkloads`
// +kubebuilder:printcolumn:name="Admitted",type=integer,JSONPath=`.status.admittedWorkloads`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.conditions[?(@.type=="Active")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the ClusterQueue.
	// +optional
	Spec ClusterQueueSpec `json:"spec,omitempty"`
	// status is the observed state of the ClusterQueue.
	// +optional
	Status ClusterQueueStatus `json:"status,omitempty"`
}

// ClusterQueueList is a list of ClusterQueues.
//
// +kubebuilder:object:root=true
type ClusterQueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterQueue `json:"items"`
}
