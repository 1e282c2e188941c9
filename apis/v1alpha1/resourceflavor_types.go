package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceFlavorSpec describes one kind of node that quota can be spent on.
type ResourceFlavorSpec struct {
	// nodeLabels are the labels that identify the nodes of this flavor. An
	// admitted job's pods get them as node selector, so they land only on
	// nodes of the flavor whose quota they consume. A job whose own node
	// selector or required node affinity contradicts them (another value
	// for one of these keys) is not admitted on this flavor.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`

	// tolerations are added to an admitted job's pods so that they can run
	// on the (usually tainted) nodes of this flavor.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// topologyLevels are node label keys from the coarsest level to the
	// finest (for example zone, block, rack, hostname). A job asks for all
	// its pods in one domain of a level with the berth.dev/topology-required
	// annotation, or for as few domains as possible with
	// berth.dev/topology-preferred; its value must be one of these keys.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.all(k, self.exists_one(o, o == k))",message="topologyLevels must not repeat a key"
	TopologyLevels []string `json:"topologyLevels,omitempty"`

	// provisioning says how berth asks the cluster autoscaler for capacity
	// of this flavor through ProvisioningRequests. Unset: never; gangs are
	// admitted on existing nodes only.
	// +optional
	Provisioning *ProvisioningPolicy `json:"provisioning,omitempty"`
}

// ProvisioningMode says when berth books capacity before admitting a gang.
// +kubebuilder:validation:Enum=Never;IfNeeded;Always
type ProvisioningMode string

const (
	// ProvisioningNever admits on existing free capacity only.
	ProvisioningNever ProvisioningMode = "Never"
	// ProvisioningIfNeeded admits at once when the gang fits existing free
	// capacity in its domain, and asks the autoscaler only otherwise.
	ProvisioningIfNeeded ProvisioningMode = "IfNeeded"
	// ProvisioningAlways books capacity through a ProvisioningRequest before
	// every admission (check-capacity when existing nodes may suffice).
	ProvisioningAlways ProvisioningMode = "Always"
)

// SinglePodJobsPolicy says how a flavor that provisions gets capacity for
// a single-pod job: a workload of one pod in all, with no topology request.
// +kubebuilder:validation:Enum=Book;Autoscaler
type SinglePodJobsPolicy string

const (
	// SinglePodJobsBook books capacity for a single-pod job as for a gang:
	// a ProvisioningRequest of its own when it does not fit existing free
	// capacity (with mode Always, for every admission).
	SinglePodJobsBook SinglePodJobsPolicy = "Book"
	// SinglePodJobsAutoscaler admits a single-pod job by quota, without a
	// ProvisioningRequest, once existing free capacity or a CapacityPool
	// that can still grow can take its pod, and releases it unpinned:
	// cluster-autoscaler's own scale-up for pending pods gives it a node,
	// packing such pods onto as few nodes as it can.
	SinglePodJobsAutoscaler SinglePodJobsPolicy = "Autoscaler"
)

// ProvisioningPolicy configures the ProvisioningRequests of a flavor.
// +kubebuilder:validation:XValidation:rule="!(has(self.singlePodJobs) && self.singlePodJobs == 'Autoscaler' && has(self.mode) && self.mode == 'Always')",message="singlePodJobs: Autoscaler contradicts mode: Always, which books capacity for every admission: set mode: IfNeeded to leave single-pod jobs to the autoscaler, or remove singlePodJobs to book them"
type ProvisioningPolicy struct {
	// mode says when to book capacity.
	// +optional
	// +kubebuilder:default=IfNeeded
	Mode ProvisioningMode `json:"mode,omitempty"`

	// singlePodJobs says how capacity is found for a single-pod job: one
	// pod in all, with no berth.dev/topology-required or -preferred
	// annotation. Such a job needs no gang booked all or nothing, and no
	// domain chosen for it. Book: it books a ProvisioningRequest of its
	// own, as a gang does. Autoscaler: it is admitted by quota once
	// existing free capacity or a CapacityPool that can still grow can
	// take its pod, and released unpinned without a request;
	// cluster-autoscaler's scale-up for pending pods packs such pods onto
	// new nodes together, where one request per job would create a node
	// per job. Unset: Autoscaler with mode IfNeeded, Book with mode Always
	// (which books every admission, and refuses Autoscaler). Gangs and
	// jobs with a topology request always book. With mode Never nothing
	// is booked and the field has no effect.
	// +optional
	SinglePodJobs SinglePodJobsPolicy `json:"singlePodJobs,omitempty"`

	// parameters are copied to every ProvisioningRequest's spec.parameters.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Parameters map[string]string `json:"parameters,omitempty"`

	// maxAttempts is how many bookings in a row may fail (across domains
	// and classes) before berth gives up on the workload and reports it
	// with ProvisioningGaveUp. A booking proved good resets the count: its
	// gang's pods all Ready within podsReadySeconds or, with that check
	// off, the booking provisioned.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	MaxAttempts int32 `json:"maxAttempts,omitempty"`

	// backoffSeconds is the wait after the first failed booking before the
	// next one; it doubles after each further failure, up to a day.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	BackoffSeconds int32 `json:"backoffSeconds,omitempty"`

	// capacityNotFoundSeconds is how long a booking may stay unprovisioned
	// after the autoscaler answered that it found no capacity
	// (Provisioned=False, reason CapacityIsNotFound: the domain's node
	// group is at its maximum, or the cloud is out of stock) before berth
	// counts the attempt as failed in that domain, releases the quota and,
	// after the backoff, books the next domain that can take the gang.
	// cluster-autoscaler keeps retrying such a request on its own (1 minute
	// after the first answer, doubling to 10 minutes) and never fails it,
	// so without this bound a gang would wait for one domain for good. The
	// default, 5 minutes, lets the autoscaler retry twice.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=604800
	CapacityNotFoundSeconds int32 `json:"capacityNotFoundSeconds,omitempty"`

	// answerTimeoutSeconds is the longest a ProvisioningRequest may go
	// without any answer (no Provisioned or Failed condition) after it was
	// created before berth counts the attempt as failed: the autoscaler is
	// not running, does not handle the class, or is backlogged. It handles
	// one request per loop (10 s by default), so the default, 15 minutes,
	// leaves room for a deep backlog.
	// +optional
	// +kubebuilder:default=900
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=604800
	AnswerTimeoutSeconds int32 `json:"answerTimeoutSeconds,omitempty"`

	// podsReadySeconds is how long after admission on booked capacity
	// every pod of the gang must be Ready; otherwise the workload is
	// evicted (the attempt counts as failed in its domain), its quota
	// released and it is queued again after the backoff. 0 turns the check
	// off.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=0
	PodsReadySeconds int32 `json:"podsReadySeconds,omitempty"`
}

// ResourceFlavorStatus is the observed state of a ResourceFlavor.
type ResourceFlavorStatus struct {
	// conditions describe the state of the flavor.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ResourceFlavor is a kind of node — a GPU model, a node pool, a capacity
// type — that ClusterQueues hand out quota for.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=brf,categories=berth
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Node labels",type=string,JSONPath=`.spec.nodeLabels`,priority=1
// +kubebuilder:printcolumn:name="Topology",type=string,JSONPath=`.spec.topologyLevels`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ResourceFlavor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the flavor.
	// +optional
	Spec ResourceFlavorSpec `json:"spec,omitempty"`
	// status is the observed state of the flavor.
	// +optional
	Status ResourceFlavorStatus `json:"status,omitempty"`
}

// ResourceFlavorList is a list of ResourceFlavors.
//
// +kubebuilder:object:root=true
type ResourceFlavorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceFlavor `json:"items"`
}
