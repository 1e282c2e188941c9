package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodSet is a group of identical pods of a gang.
type PodSet struct {
	// name of the pod set, unique in the workload (for a batch Job: "main").
	// +required
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	Name string `json:"name"`

	// count is the number of pods, all of which must be admitted together.
	// +required
	// +kubebuilder:validation:Minimum=1
	Count int32 `json:"count"`

	// requests are the resources one pod needs, computed the way
	// kube-scheduler does: the larger of the sum of the containers' requests
	// and each init container's, plus pod overhead.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Requests corev1.ResourceList `json:"requests,omitempty"`

	// template is the part of the pods' template that decides where they
	// may run, as the job declares it (without what berth adds when it
	// starts the job). berth places the gang only on nodes the pods could
	// be bound to, and books capacity with it. Written by berth's job
	// controller; a change to it re-queues the gang. Workloads written
	// before it existed have none: their pods are placed by their
	// requests alone.
	// +optional
	Template *PodSetTemplate `json:"template,omitempty"`
}

// PodSetTemplate is the scheduling-relevant part of a pod set's pod
// template: the labels other pods' affinity selects, and the pod spec
// reduced to the fields that decide which node can take a pod (node
// selector and affinity, tolerations, topology spread, pod (anti-)affinity,
// resource claims, priority class, runtime class, overhead, volumes that
// bind to storage, and each container's image, requests, limits and host
// ports). Everything else — commands, environment, probes, mounts — is
// left out, which keeps it small; berth's job controller rejects a job
// whose template is still larger than 64 KiB.
type PodSetTemplate struct {
	// labels of the pods, without berth's own.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// spec of the pods, reduced as described above.
	// +required
	Spec corev1.PodSpec `json:"spec"`
}

// WorkloadSpec is the desired state of a Workload.
type WorkloadSpec struct {
	// queueName is the LocalQueue, in the workload's namespace, it is
	// submitted to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="queueName is immutable"
	QueueName string `json:"queueName"`

	// podSets are the pods of the gang; all are admitted together or none.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	PodSets []PodSet `json:"podSets"`

	// priority orders the workload in its ClusterQueue (higher first) and
	// decides whom it may preempt.
	// +optional
	Priority int32 `json:"priority,omitempty"`

	// priorityClassName is the PriorityClass the priority was taken from:
	// the job's berth.dev/priority-class label, else its pods'
	// priorityClassName. Empty when the priority is 0 by default.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// topology asks for the whole gang to be placed in one topology domain
	// (taken from the job's berth.dev/topology-required or
	// berth.dev/topology-preferred annotation).
	// +optional
	Topology *TopologyRequest `json:"topology,omitempty"`

	// active false deactivates the workload: a pending one leaves its queue,
	// an admitted one is evicted, and it waits, with reason Deactivated,
	// until active is true again (unset means true). berth never changes
	// it; `kubectl berth deactivate|activate workload` does.
	// +optional
	Active *bool `json:"active,omitempty"`
}

// IsActive reports whether the workload is active (spec.active unset or
// true).
func (w *Workload) IsActive() bool { return w.Spec.Active == nil || *w.Spec.Active }

// TopologyMode says how strictly a gang must stay in one domain.
// +kubebuilder:validation:Enum=Required;Preferred
type TopologyMode string

const (
	// TopologyRequired admits the gang only into one domain of the level.
	TopologyRequired TopologyMode = "Required"
	// TopologyPreferred places the gang in one domain of the level if it
	// can, else in one domain of the coarsest level that holds it, else
	// anywhere.
	TopologyPreferred TopologyMode = "Preferred"
)

// TopologyRequest is a gang's topology constraint.
type TopologyRequest struct {
	// mode is Required or Preferred.
	// +required
	Mode TopologyMode `json:"mode"`
	// level is a node label key among the flavor's topologyLevels.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Level string `json:"level"`
}

// PodSetAssignment is what a pod set was admitted with.
type PodSetAssignment struct {
	// name of the pod set.
	// +required
	Name string `json:"name"`
	// count of pods admitted.
	// +required
	Count int32 `json:"count"`
	// flavors assigned, per resource.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Flavors map[corev1.ResourceName]string `json:"flavors,omitempty"`
}

// Admission is the quota a workload holds.
type Admission struct {
	// clusterQueue whose quota the workload holds.
	// +required
	ClusterQueue string `json:"clusterQueue"`
	// podSetAssignments, one per pod set.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	PodSetAssignments []PodSetAssignment `json:"podSetAssignments"`

	// topology is the domain the gang was placed in, when it asked for one.
	// +optional
	Topology *TopologyAssignment `json:"topology,omitempty"`

	// provisioning is the capacity this admission booked through a
	// ProvisioningRequest before the gang could start: the class and the
	// nodes to create per CapacityPool (none for a check-capacity booking).
	// It stays after the capacity is provisioned, so berth keeps the new
	// nodes reserved until they exist; unset for admissions on existing
	// capacity.
	// +optional
	Provisioning *AdmissionProvisioning `json:"provisioning,omitempty"`
}

// ProvisioningClass is the class of the ProvisioningRequest a booking asks
// cluster-autoscaler for. The values are cluster-autoscaler's own class
// names, so a class is written onto a ProvisioningRequest as it is.
type ProvisioningClass string

const (
	// ProvisioningClassCheckCapacity books capacity that exists: the
	// autoscaler checks that current nodes can hold the gang.
	ProvisioningClassCheckCapacity ProvisioningClass = "check-capacity.autoscaling.x-k8s.io"
	// ProvisioningClassAtomicScaleUp creates the nodes the gang needs, all
	// or none.
	ProvisioningClassAtomicScaleUp ProvisioningClass = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
)

// AdmissionProvisioning is the capacity an admission books.
type AdmissionProvisioning struct {
	// className is the ProvisioningRequest class:
	// check-capacity.autoscaling.x-k8s.io when existing nodes suffice,
	// best-effort-atomic-scale-up.autoscaling.x-k8s.io when nodes must be
	// created.
	// +required
	// +kubebuilder:validation:MaxLength=253
	ClassName ProvisioningClass `json:"className"`
	// newNodes are the nodes to create, per CapacityPool.
	// +optional
	// +listType=map
	// +listMapKey=pool
	// +kubebuilder:validation:MaxItems=16
	NewNodes []PoolNodes `json:"newNodes,omitempty"`
}

// PoolNodes is a number of nodes of one CapacityPool.
type PoolNodes struct {
	// pool is the CapacityPool's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Pool string `json:"pool"`
	// nodes is how many.
	// +required
	// +kubebuilder:validation:Minimum=1
	Nodes int32 `json:"nodes"`
}

// TopologyAssignment is the topology domain a gang was admitted into: the
// gang's pods get levels[i]=values[i] as node selector.
// +kubebuilder:validation:XValidation:rule="size(self.levels) == size(self.values)",message="levels and values must have the same length"
type TopologyAssignment struct {
	// flavor whose topology the domain belongs to.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Flavor string `json:"flavor"`
	// levels are the flavor's topology label keys from the coarsest down to
	// the level of the domain, which may be coarser than the level asked
	// for when the request was Preferred.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=317
	Levels []string `json:"levels"`
	// values are the domain's label values, one per level. The last one
	// is empty while the domain is a node still to be created: a gang that
	// must fit one node (levels ending with kubernetes.io/hostname) booked
	// on a new node of a CapacityPool is pinned to that node, and the value
	// set, once the node joined and holds the whole gang; its pods are not
	// started before.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	Values []string `json:"values"`
}

// NodeSelector is the node selector that keeps pods in the domain. A level
// whose value is empty (a node still to be created, see AwaitsNode) is
// left out.
func (t *TopologyAssignment) NodeSelector() map[string]string {
	out := make(map[string]string, len(t.Levels))
	for i, l := range t.Levels {
		if i < len(t.Values) && t.Values[i] != "" {
			out[l] = t.Values[i]
		}
	}
	return out
}

// AwaitsNode reports whether the domain is a node still to be created: its
// last value is empty until the gang is pinned to the node that joined.
func (t *TopologyAssignment) AwaitsNode() bool {
	return t != nil && len(t.Values) > 0 && t.Values[len(t.Values)-1] == ""
}

// ProvisioningState is where the latest capacity booking of a workload
// stands.
// +kubebuilder:validation:Enum=Pending;Provisioned;Failed;CapacityNotFound;NoAnswer;BookingExpired;CapacityRevoked;PodsNotReady;Cancelled
type ProvisioningState string

const (
	// ProvisioningPending means quota is reserved and the attempt's
	// ProvisioningRequest is created (or about to be) and not decided yet.
	ProvisioningPending ProvisioningState = "Pending"
	// ProvisioningProvisioned means the capacity is booked and the gang was
	// admitted on it.
	ProvisioningProvisioned ProvisioningState = "Provisioned"
	// ProvisioningFailed means the autoscaler answered Failed.
	ProvisioningFailed ProvisioningState = "Failed"
	// ProvisioningCapacityNotFound means the autoscaler found no capacity
	// in the domain for longer than the flavor's capacityNotFoundSeconds.
	ProvisioningCapacityNotFound ProvisioningState = "CapacityNotFound"
	// ProvisioningNoAnswer means the autoscaler did not answer within the
	// flavor's answerTimeoutSeconds.
	ProvisioningNoAnswer ProvisioningState = "NoAnswer"
	// ProvisioningBookingExpired means the booking lapsed before the pods
	// used it.
	ProvisioningBookingExpired ProvisioningState = "BookingExpired"
	// ProvisioningCapacityRevoked means the autoscaler took the capacity
	// back.
	ProvisioningCapacityRevoked ProvisioningState = "CapacityRevoked"
	// ProvisioningPodsNotReady means the gang started on the booking but not
	// every pod was Ready within podsReadySeconds.
	ProvisioningPodsNotReady ProvisioningState = "PodsNotReady"
	// ProvisioningCancelled means berth withdrew the booking: the gang was
	// preempted or its queue drained while it waited for capacity.
	ProvisioningCancelled ProvisioningState = "Cancelled"
)

// ProvisioningStatus is the latest capacity booking of a workload and what
// earlier ones taught: the domains that failed and how many attempts
// failed in a row. The admission engine rebuilds its booking state from it
// after a restart.
type ProvisioningStatus struct {
	// attempt numbers the workload's bookings, from 1; requests are named
	// after it, so a new attempt never reuses an old request's name.
	// +required
	// +kubebuilder:validation:Minimum=1
	Attempt int32 `json:"attempt"`
	// failures counts the attempts that failed since the last one that was
	// provisioned; berth gives up when it reaches the flavor's maxAttempts.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Failures int32 `json:"failures,omitempty"`
	// requestName is the ProvisioningRequest of this attempt, in the
	// workload's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RequestName string `json:"requestName,omitempty"`
	// className is the ProvisioningRequest class asked for.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClassName ProvisioningClass `json:"className,omitempty"`
	// flavor is the ResourceFlavor whose capacity is booked and whose
	// provisioning policy applies.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Flavor string `json:"flavor,omitempty"`
	// state is where the booking stands.
	// +required
	State ProvisioningState `json:"state"`
	// topology is the domain the capacity is asked for; unset for an
	// unpinned request.
	// +optional
	Topology *TopologyAssignment `json:"topology,omitempty"`
	// startTime is when quota was reserved for this attempt.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// capacityNotFoundSince is when the autoscaler first answered this
	// attempt that it found no capacity (Provisioned=False, reason
	// CapacityIsNotFound); the attempt fails once that lasted the flavor's
	// capacityNotFoundSeconds.
	// +optional
	CapacityNotFoundSince *metav1.Time `json:"capacityNotFoundSince,omitempty"`
	// retryAfter is when the next attempt may start, after a failure.
	// +optional
	RetryAfter *metav1.Time `json:"retryAfter,omitempty"`
	// message says what happened, in the autoscaler's words where it gave
	// any.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// failedDomains are the domains (with their flavor and level) whose
	// bookings failed for this workload; the next attempt tries another
	// where one can take the gang.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	FailedDomains []TopologyAssignment `json:"failedDomains,omitempty"`
	// gaveUp is set when maxAttempts bookings failed in a row: the workload
	// is not queued again until its Workload is deleted (the job's
	// controller creates a new one).
	// +optional
	GaveUp bool `json:"gaveUp,omitempty"`
}

// WorkloadStatus is the observed state of a Workload.
type WorkloadStatus struct {
	// conditions: QuotaReserved, Admitted, Evicted, Finished, PodsReady
	// (see the condition constants for their reasons).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// admission is set while the workload holds quota.
	// +optional
	Admission *Admission `json:"admission,omitempty"`

	// provisioning is the latest capacity booking made for the workload.
	// +optional
	Provisioning *ProvisioningStatus `json:"provisioning,omitempty"`
}

// Workload is one gang — a job's pods, all of which are admitted together
// or not at all — and the quota it waits for or holds. Job adapters create
// and own it; users read it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=bwl,categories=berth
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.queueName`
// +kubebuilder:printcolumn:name="ClusterQueue",type=string,JSONPath=`.status.admission.clusterQueue`
// +kubebuilder:printcolumn:name="Admitted",type=string,JSONPath=`.status.conditions[?(@.type=="Admitted")].status`
// +kubebuilder:printcolumn:name="Finished",type=string,JSONPath=`.status.conditions[?(@.type=="Finished")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="QuotaReserved")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the workload.
	// +required
	Spec WorkloadSpec `json:"spec"`
	// status is the observed state of the workload.
	// +optional
	Status WorkloadStatus `json:"status,omitempty"`
}

// WorkloadList is a list of Workloads.
//
// +kubebuilder:object:root=true
type WorkloadList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workload `json:"items"`
}
