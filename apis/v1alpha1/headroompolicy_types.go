package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HeadroomLabel is the label and taint (NoSchedule, the value a
// ClusterQueue's name) of the nodes, and of the CapacityPool templates,
// that hold a ClusterQueue's warm headroom: only replicas that tolerate
// the taint run there, so a borrower on the queue's lent quota never takes
// the capacity kept warm for it.
const HeadroomLabel = "berth.dev/headroom"

// HeadroomPlaceholderLabel marks berth's headroom placeholder pods (its
// value names their Deployment): their room is the headroom itself, free
// for the replicas that preempt them, so berth's capacity view counts it
// free.
const HeadroomPlaceholderLabel = "berth.dev/headroom-placeholder"

// HeadroomMode is the rule that sizes headroom.
// +kubebuilder:validation:Enum=Fixed;Percent;Demand
type HeadroomMode string

// The sizing rules.
const (
	// HeadroomFixed keeps sizing.replicas replicas.
	HeadroomFixed HeadroomMode = "Fixed"
	// HeadroomPercent keeps sizing.percent percent of the target's
	// replicas, rounded up.
	HeadroomPercent HeadroomMode = "Percent"
	// HeadroomDemand keeps what recent scale-ups needed at once.
	HeadroomDemand HeadroomMode = "Demand"
)

// HeadroomTarget is the serving workload the headroom is for.
type HeadroomTarget struct {
	// kind of the workload: Deployment or StatefulSet (apps/v1), or
	// LeaderWorkerSet (leaderworkerset.x-k8s.io/v1).
	// +required
	// +kubebuilder:validation:Enum=Deployment;StatefulSet;LeaderWorkerSet
	Kind string `json:"kind"`
	// name of the workload, in the policy's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// HeadroomDemandRule sizes headroom from the target's recent scale-ups: at
// every moment within window that its replicas rose, the replicas added
// since one provisioningLatency before is a sample; the size is the
// percentile-th of the samples.
// +kubebuilder:validation:XValidation:rule="duration(self.provisioningLatency) > duration('0s') && duration(self.provisioningLatency) <= duration(self.window)",message="provisioningLatency must be positive and no longer than window"
// +kubebuilder:validation:XValidation:rule="duration(self.window) <= duration('168h')",message="window is at most 168h (a week)"
// +kubebuilder:validation:XValidation:rule="!has(self.period) || duration(self.period) + (has(self.lead) ? duration(self.lead) : duration(self.provisioningLatency)) <= duration(self.window)",message="period plus lead must fit in window: the window must hold the earlier period's scale-ups the lead looks ahead to"
// +kubebuilder:validation:XValidation:rule="!has(self.lead) || has(self.period)",message="lead goes with period"
type HeadroomDemandRule struct {
	// window is how far back scale-ups count (at most a week).
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	Window metav1.Duration `json:"window,omitempty"`
	// provisioningLatency is how long a new node of the headroom pools
	// takes to become allocatable: replicas added within it need headroom
	// at once; later ones find the headroom restored.
	// +optional
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	ProvisioningLatency metav1.Duration `json:"provisioningLatency,omitempty"`
	// percentile of the samples, 1-100.
	// +optional
	// +kubebuilder:default=95
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Percentile int32 `json:"percentile,omitempty"`
	// period, for traffic that bursts at the same hours (24h): only the
	// scale-ups of the same time of earlier periods (from
	// provisioningLatency before it to lead after it) and of the last
	// provisioningLatency count, so that headroom is kept ahead of the
	// hours that burst and not through the quiet ones. Unset, every
	// scale-up within the window counts.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	Period *metav1.Duration `json:"period,omitempty"`
	// lead is how far ahead of an earlier period's scale-ups their
	// headroom is kept already: at least a node's provisioning latency, so
	// that it is warm when they recur. Default provisioningLatency; only
	// with period.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	Lead *metav1.Duration `json:"lead,omitempty"`
}

// HeadroomSizing is how many replicas' worth of capacity to keep.
// +kubebuilder:validation:XValidation:rule="self.mode != 'Fixed' || has(self.replicas)",message="mode Fixed needs replicas"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Percent' || has(self.percent)",message="mode Percent needs percent"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Demand' || has(self.demand)",message="mode Demand needs demand"
// +kubebuilder:validation:XValidation:rule="!has(self.max) || self.max == 0 || !has(self.min) || self.min <= self.max",message="min must not exceed max"
type HeadroomSizing struct {
	// mode is the rule: Fixed, Percent or Demand.
	// +required
	Mode HeadroomMode `json:"mode"`
	// replicas is the Fixed size.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Replicas *int32 `json:"replicas,omitempty"`
	// percent of the target's replicas, rounded up, for Percent.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Percent *int32 `json:"percent,omitempty"`
	// demand is the Demand rule.
	// +optional
	Demand *HeadroomDemandRule `json:"demand,omitempty"`
	// min is the least headroom kept, whatever the rule says.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Min int32 `json:"min,omitempty"`
	// max is the most headroom kept; 0 sets no bound but the quota.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Max int32 `json:"max,omitempty"`
}

// HeadroomPolicySpec says how much warm capacity to keep for a serving
// workload's next replicas, and where.
type HeadroomPolicySpec struct {
	// targetRef is the workload, labelled berth.dev/queue-name, whose
	// replicas the headroom is for; one replica is the headroom's unit.
	// +required
	TargetRef HeadroomTarget `json:"targetRef"`
	// sizing is how many replicas' worth to keep. Never more is kept than
	// the ClusterQueue's quota (nominal plus borrowing limit) could still
	// admit beyond the replicas the target has.
	// +required
	Sizing HeadroomSizing `json:"sizing"`
	// topologyLevel keeps each replica's headroom whole within one domain
	// of this node label (a rack), for replicas that must run in one;
	// unset, the target's berth.dev/topology-required annotation, or none.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	TopologyLevel string `json:"topologyLevel,omitempty"`
}

// HeadroomDomain is the headroom kept in one topology domain.
type HeadroomDomain struct {
	// name is the domain's value of the topology level ("" without one).
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// replicas kept there.
	// +required
	Replicas int32 `json:"replicas"`
	// available is how many of them fit now on the domain's Ready
	// headroom nodes (placeholders' room counted as free): fewer while
	// the autoscaler restores what replicas took.
	// +optional
	Available int32 `json:"available,omitempty"`
}

// HeadroomObservation is the target's replica count from time on.
type HeadroomObservation struct {
	// time the count was first seen.
	// +required
	Time metav1.Time `json:"time"`
	// replicas the target had.
	// +required
	Replicas int32 `json:"replicas"`
}

// Headroom mechanisms: how the headroom is kept.
const (
	// HeadroomByCapacityBuffer keeps it as cluster-autoscaler
	// CapacityBuffers (autoscaling.x-k8s.io/v1beta1).
	HeadroomByCapacityBuffer = "CapacityBuffer"
)

// HeadroomPolicyStatus is what berth keeps for a HeadroomPolicy.
type HeadroomPolicyStatus struct {
	// conditions: Ready says whether the headroom is kept, and if not, why.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// replicas is the target's replica count when last seen.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// desiredReplicas is the headroom the sizing gives now.
	// +optional
	DesiredReplicas int32 `json:"desiredReplicas,omitempty"`
	// availableReplicas is how much of it fits now on Ready headroom
	// nodes, summed over the domains.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
	// clusterQueue is the target's ClusterQueue, whose headroom nodes
	// (berth.dev/headroom=<clusterQueue>) hold the headroom.
	// +optional
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// mechanism keeping it: CapacityBuffer.
	// +optional
	Mechanism string `json:"mechanism,omitempty"`
	// domains holds the headroom per topology domain.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	Domains []HeadroomDomain `json:"domains,omitempty"`
	// history is the target's replica count over the Demand window, each
	// change once, so that a restart keeps the rule's memory.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=512
	History []HeadroomObservation `json:"history,omitempty"`
}

// HeadroomPolicy keeps warm capacity for a serving workload's next
// replicas, in nodes labelled and tainted berth.dev/headroom=<its
// ClusterQueue>, so that a replica added in a burst starts on a node that
// is already there. A platform team creates it (no built-in role grants
// it to tenants); docs/headroom.md describes it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=berth
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.sizing.mode`
// +kubebuilder:printcolumn:name="Headroom",type=integer,JSONPath=`.status.desiredReplicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HeadroomPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HeadroomPolicySpec   `json:"spec"`
	Status HeadroomPolicyStatus `json:"status,omitempty"`
}

// HeadroomPolicyList is a list of HeadroomPolicies.
//
// +kubebuilder:object:root=true
type HeadroomPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HeadroomPolicy `json:"items"`
}
