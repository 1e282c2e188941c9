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
