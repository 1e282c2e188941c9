package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeTemplate describes the nodes of a CapacityPool: what each one offers
// and where it sits in the topology.
type NodeTemplate struct {
	// labels every node of the pool carries. They include the flavor's
	// nodeLabels and one value per topology level of the flavor (zone,
	// block, rack, ...), which places the pool in one topology domain.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Labels map[string]string `json:"labels,omitempty"`

	// taints every node of the pool carries.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Taints []corev1.Taint `json:"taints,omitempty"`

	// allocatable is what one node offers to pods.
	// +required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=32
	Allocatable corev1.ResourceList `json:"allocatable"`

	// devices are the DRA devices each node of the pool publishes in
	// ResourceSlices of its own (resource.k8s.io/v1, node-local, one pool
	// per driver named after the node), as a DRA driver on a real node of
	// the group would. An autoscaler that simulates the DRA scheduler
	// plugin for a new node (cluster-autoscaler's template node) needs them
	// to know which pods with ResourceClaims the node can take. At most 128
	// devices in all, the most one ResourceSlice holds.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.map(d, d.count).sum() <= 128",message="a node publishes at most 128 devices"
	Devices []TemplateDevices `json:"devices,omitempty"`
}

// TemplateDevices are count identical DRA devices of one driver, named
// <name>-0 to <name>-<count-1>.
type TemplateDevices struct {
	// name prefixes the devices' names; it is unique among the template's
	// devices so that every device name is.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=58
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// driver is the DRA driver that publishes the devices, a DNS subdomain
	// such as gpu.nvidia.com. Attribute and capacity names without a domain
	// are in the driver's domain, as DeviceClass selectors see them.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Driver string `json:"driver"`

	// count is how many such devices each node has.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	Count int32 `json:"count"`

	// attributes every one of the devices carries, by qualified name
	// (e.g. productName, or gpu.nvidia.com/productName), each one of int,
	// bool, string or version, as in a ResourceSlice.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Attributes map[resourcev1.QualifiedName]resourcev1.DeviceAttribute `json:"attributes,omitempty"`

	// capacity every one of the devices has, by qualified name (e.g.
	// memory: 141Gi).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Capacity map[resourcev1.QualifiedName]resource.Quantity `json:"capacity,omitempty"`
}

// CapacityPoolSpec is the desired state of a CapacityPool.
// +kubebuilder:validation:XValidation:rule="!has(self.minNodes) || self.minNodes <= self.maxNodes",message="minNodes must not exceed maxNodes"
type CapacityPoolSpec struct {
	// flavor is the ResourceFlavor the pool's nodes belong to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Flavor string `json:"flavor"`

	// nodeTemplate describes each node the pool has or can create.
	// +required
	NodeTemplate NodeTemplate `json:"nodeTemplate"`

	// minNodes is the number of nodes the pool keeps.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinNodes int32 `json:"minNodes,omitempty"`

	// maxNodes is the most nodes the pool can have.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	MaxNodes int32 `json:"maxNodes"`
}

// CapacityPoolStatus is the observed state of a CapacityPool, written by
// berth (no cluster-autoscaler writes it).
type CapacityPoolStatus struct {
	// nodes is the number of nodes of the pool that exist (labelled
	// berth.dev/capacity-pool with the pool's name), as berth counted them.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`

	// conditions describe the state of the pool.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CapacityPool is capacity that exists or can be created: one autoscaler
// node group. It lets berth see capacity before it exists, choose the
// topology domain a gang fits in, and ask the autoscaler for exactly that.
// Every node of a pool carries the label berth.dev/capacity-pool with the
// pool's name.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=cpool,categories=berth
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Flavor",type=string,JSONPath=`.spec.flavor`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxNodes`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CapacityPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the pool.
	// +required
	Spec CapacityPoolSpec `json:"spec"`
	// status is the observed state of the pool.
	// +optional
	Status CapacityPoolStatus `json:"status,omitempty"`
}

// CapacityPoolList is a list of CapacityPools.
//
// +kubebuilder:object:root=true
type CapacityPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityPool `json:"items"`
}
