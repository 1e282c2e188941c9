package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LocalQueueSpec is the desired state of a LocalQueue.
type LocalQueueSpec struct {
	// clusterQueue is the ClusterQueue this LocalQueue submits to. It cannot
	// be changed: create another LocalQueue instead.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterQueue is immutable: create a new LocalQueue to submit to another ClusterQueue"
	ClusterQueue string `json:"clusterQueue"`

	// fairSharing holds this LocalQueue's weight in sharing its ClusterQueue
	// with the ClusterQueue's other LocalQueues. Used only when the controller
	// runs with --local-queue-fair-sharing.
	// +optional
	FairSharing *LocalQueueFairSharing `json:"fairSharing,omitempty"`

	// stopPolicy stops the LocalQueue: None (default); Hold, where its
	// pending workloads wait and admitted ones keep running; or
	// HoldAndDrain, which also evicts the admitted ones. Its ClusterQueue
	// goes on admitting the workloads of its other LocalQueues.
	// +optional
	// +kubebuilder:default=None
	StopPolicy StopPolicy `json:"stopPolicy,omitempty"`

	// priorityClasses lists the PriorityClasses of value above 0 whose value
	// this LocalQueue's workloads may take as their priority (from the
	// job's berth.dev/priority-class label or its pod template's
	// priorityClassName). A workload may always take a class of value 0 or
	// less; one that names a higher class not listed here waits with reason
	// PriorityClassNotAllowed. Priority orders a ClusterQueue's workloads and
	// decides whom preemption may evict, across the namespaces that share
	// it, so which namespace may use which class is the platform team's
	// choice: tenants cannot change this list.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	PriorityClasses []string `json:"priorityClasses,omitempty"`
}

// LocalQueueFairSharing is a LocalQueue's share of its ClusterQueue.
type LocalQueueFairSharing struct {
	// weight of this LocalQueue among the LocalQueues of its ClusterQueue.
	// Among workloads of equal priority, a LocalQueue of weight 2 is served
	// twice as much quota-share per turn as one of weight 1. A change applies
	// to workloads queued after it.
	// +optional
	// +kubebuilder:default="1"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="weight must be a positive quantity, for example 1 or 0.5"
	Weight *resource.Quantity `json:"weight,omitempty"`
}

// LocalQueueStatus is the observed state of a LocalQueue.
type LocalQueueStatus struct {
	// conditions: Active says whether the LocalQueue's ClusterQueue exists,
	// accepts this namespace and can admit.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// pendingWorkloads is the number of this queue's workloads waiting for
	// admission.
	// +optional
	PendingWorkloads int32 `json:"pendingWorkloads,omitempty"`

	// admittedWorkloads is the number of this queue's workloads holding quota.
	// +optional
	AdmittedWorkloads int32 `json:"admittedWorkloads,omitempty"`
}

// LocalQueue is a namespace's entry point to a ClusterQueue. Jobs name it
// with the berth.dev/queue-name label.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=blq,categories=berth
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="ClusterQueue",type=string,JSONPath=`.spec.clusterQueue`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pendingWorkloads`
// +kubebuilder:printcolumn:name="Admitted",type=integer,JSONPath=`.status.admittedWorkloads`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.conditions[?(@.type=="Active")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LocalQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the LocalQueue.
	// +required
	Spec LocalQueueSpec `json:"spec"`
	// status is the observed state of the LocalQueue.
	// +optional
	Status LocalQueueStatus `json:"status,omitempty"`
}

// LocalQueueList is a list of LocalQueues.
//
// +kubebuilder:object:root=true
type LocalQueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LocalQueue `json:"items"`
}
