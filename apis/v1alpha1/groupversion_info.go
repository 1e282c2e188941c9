// Package v1alpha1 contains the berth.dev/v1alpha1 API: the objects a platform
// team uses to describe GPU capacity and quota (ResourceFlavor, ClusterQueue,
// LocalQueue, CapacityPool), the Workload, berth's record of one gang waiting for, or
// holding, an admission, and the notification policies that report the failures of
// admitted gangs (NotificationPolicy, ClusterNotificationPolicy), and the
// warm headroom kept for serving workloads' bursts (HeadroomPolicy).
//
// +kubebuilder:object:generate=true
// +groupName=berth.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of every type in this package.
var GroupVersion = schema.GroupVersion{Group: "berth.dev", Version: "v1alpha1"}

// AddToScheme registers every type in this package with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&ResourceFlavor{}, &ResourceFlavorList{},
		&ClusterQueue{}, &ClusterQueueList{},
		&LocalQueue{}, &LocalQueueList{},
		&Workload{}, &WorkloadList{},
		&CapacityPool{}, &CapacityPoolList{},
		&NotificationPolicy{}, &NotificationPolicyList{},
		&ClusterNotificationPolicy{}, &ClusterNotificationPolicyList{},
		&HeadroomPolicy{}, &HeadroomPolicyList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
