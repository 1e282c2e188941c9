package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceFlavorSpec describes one kind of node that quota can be spent on.
type ResourceFlavorSpec struct {
	// nodeLabels are the labels that identify the nodes of this flavor. An
	// admitted job's pods get them as node selector, so they land only on
	// nodes of the flavor whose quota they consume.
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

// ProvisioningPolicy configures the ProvisioningRequests of a flavor.
type ProvisioningPolicy struct {
	// mode says when to book capacity.
	// +optional
	// +kubebuilder:default=IfNeeded
	Mode ProvisioningMode `json:"mode,omitempty"`

	// parameters are copied to every ProvisioningRequest's spec.parameters.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Parameters map[string]string `json:"parameters,omitempty"`

	// maxAttempts is how many ProvisioningRequests berth makes for one
	// admission (across domains and classes) before it reports the
	// workload inadmissible.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	MaxAttempts int32 `json:"maxAttempts,omitempty"`

	// backoffSeconds is the wait before the second attempt; it doubles
	// for each further attempt.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	BackoffSeconds int32 `json:"backoffSeconds,omitempty"`

	// podsReadySeconds is how long after admission every pod of the gang
	// must be Ready; otherwise the workload is evicted, its quota released
	// and it is queued again. 0 turns the check off.
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
// +kubebuilder:resource:scope=Cluster,shortName=flavor;rf
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
