// Package v1beta1 is berth's own typed subset of cluster-autoscaler's
// CapacityBuffer API (autoscaling.x-k8s.io/v1beta1, served by
// cluster-autoscaler 1.35 and later with --capacity-buffer-controller-enabled
// and --capacity-buffer-pod-injection-enabled): the fields berth writes to
// keep warm headroom and the stand-in autoscaler reads to serve it, written
// from the API's documentation (docs/headroom.md cites it). The
// ProvisioningRequest module berth pins has no CapacityBuffer types, so
// berth types the few fields it needs here; an API server serving the full
// CRD keeps the fields berth does not know.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of the CapacityBuffer API.
var GroupVersion = schema.GroupVersion{Group: "autoscaling.x-k8s.io", Version: "v1beta1"}

// Resource is the CapacityBuffer resource, for discovery.
const Resource = "capacitybuffers"

// ActiveCapacity is the provisioning strategy (the default) under which
// cluster-autoscaler keeps a buffer's capacity provisioned.
const ActiveCapacity = "buffer.x-k8s.io/active-capacity"

// Condition types and reasons cluster-autoscaler writes on a buffer.
const (
	// ConditionReadyForProvisioning is the buffer controller's: the status
	// says what to provision (a pod template and a replica count).
	ConditionReadyForProvisioning = "ReadyForProvisioning"
	// ConditionProvisioning is the pod injection's: the buffer's pods were
	// added to the autoscaler's loop.
	ConditionProvisioning = "Provisioning"
	// ConditionLimitedByQuotas is the buffer controller's: the namespace's
	// ResourceQuotas cut the replica count.
	ConditionLimitedByQuotas = "LimitedByQuotas"

	// ReasonAttributesSetSuccessfully goes with ReadyForProvisioning=True.
	ReasonAttributesSetSuccessfully = "AttributesSetSuccessfully"
	// ReasonError goes with ReadyForProvisioning=False.
	ReasonError = "error"
	// ReasonResourceQuotasAllocated goes with LimitedByQuotas either way.
	ReasonResourceQuotasAllocated = "ResourceQuotasAllocated"
	// ReasonFakePodsInjected goes with Provisioning=True.
	ReasonFakePodsInjected = "FakePodsInjected"
	// ReasonNotReadyForProvisioning, ReasonBufferIsEmpty and
	// ReasonFailedToGetPodTemplate go with Provisioning=False.
	ReasonNotReadyForProvisioning = "NotReadyForProvisioning"
	ReasonBufferIsEmpty           = "BufferIsEmpty"
	ReasonFailedToGetPodTemplate  = "FailedToGetPodTemplate"
)

// LocalObjectRef names an object in the buffer's namespace.
type LocalObjectRef struct {
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ScalableRef names an object with a scale subresource (a Deployment, a
// StatefulSet) whose pod template and replica count size the buffer.
type ScalableRef struct {
	// APIGroup of the object; "" is the core group.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the object.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// CapacityBufferSpec is what capacity to keep provisioned: replicas of a
// pod, from a PodTemplate or a scalable object's template.
//
// +kubebuilder:validation:XValidation:rule="!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",message="a buffer of a podTemplateRef needs replicas or limits to size it"
// +kubebuilder:validation:XValidation:rule="!(has(self.podTemplateRef) && has(self.scalableRef))",message="set one of podTemplateRef and scalableRef, not both"
type CapacityBufferSpec struct {
	// ProvisioningStrategy is how the capacity is kept;
	// buffer.x-k8s.io/active-capacity keeps it provisioned.
	// +kubebuilder:default="buffer.x-k8s.io/active-capacity"
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
	// PodTemplateRef is the PodTemplate one replica of the buffer is.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// ScalableRef is the object whose pod template one replica is, and
	// whose replicas Percentage counts.
	// +optional
	ScalableRef *ScalableRef `json:"scalableRef,omitempty"`
	// Replicas is how many replicas to keep.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Percentage of the scalable object's replicas to keep, rounded up.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Percentage *int32 `json:"percentage,omitempty"`
	// Limits caps the replicas by their total requests.
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
}

// CapacityBufferStatus is what the autoscaler keeps for the buffer.
type CapacityBufferStatus struct {
	// PodTemplateRef is the PodTemplate the autoscaler provisions replicas
	// of.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// Replicas is how many replicas it provisions, after limits and
	// quotas.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// PodTemplateGeneration is the generation of that PodTemplate when the
	// status was written.
	// +optional
	PodTemplateGeneration *int64 `json:"podTemplateGeneration,omitempty"`
	// Conditions: ReadyForProvisioning, Provisioning, LimitedByQuotas.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ProvisioningStrategy is the strategy the status was written for.
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
}

// CapacityBuffer keeps capacity for replicas of a pod provisioned ahead of
// the pods that will use it; the capacity is not reserved for any
// particular pod.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cb
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=`.spec.provisioningStrategy`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CapacityBuffer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CapacityBufferSpec   `json:"spec"`
	Status CapacityBufferStatus `json:"status,omitempty"`
}

// CapacityBufferList is a list of CapacityBuffers.
//
// +kubebuilder:object:root=true
type CapacityBufferList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityBuffer `json:"items"`
}

// AddToScheme registers the CapacityBuffer types with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &CapacityBuffer{}, &CapacityBufferList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
