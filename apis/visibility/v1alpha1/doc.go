// Package v1alpha1 is the visibility.berth.dev/v1alpha1 API: read-only
// views of berth's queues, computed by the admission engine on request and
// served by the leader as an aggregated API, not stored anywhere.
//
// +k8s:openapi-gen=true
// +kubebuilder:object:generate=true
// +kubebuilder:skip
// +groupName=visibility.berth.dev
package v1alpha1
