package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API's group and version.
var GroupVersion = schema.GroupVersion{Group: "visibility.berth.dev", Version: "v1alpha1"}

// AddToScheme registers the API's types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ClusterQueue{}, &LocalQueue{}, &PendingWorkloadsSummary{}, &PendingWorkloadOptions{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// ClusterQueue is the parent of the pendingworkloads subresource; it has no
// verbs of its own.
//
// +kubebuilder:object:root=true
type ClusterQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

// LocalQueue is the parent of the pendingworkloads subresource; it has no
// verbs of its own.
//
// +kubebuilder:object:root=true
type LocalQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

// PendingWorkloadOptions are the query parameters of pendingworkloads.
//
// +kubebuilder:object:root=true
type PendingWorkloadOptions struct {
	metav1.TypeMeta `json:",inline"`
	// Offset skips that many pending workloads.
	Offset int64 `json:"offset,omitempty"`
	// Limit caps how many are returned (default DefaultLimit, at most
	// MaxLimit): each costs the engine an explanation under its lock.
	Limit int64 `json:"limit,omitempty"`
	// Workload, when set, returns that workload's entry alone (none when it
	// is not pending in the queue) and ignores Offset and Limit: a lookup
	// that costs one explanation instead of paging through the line. In a
	// LocalQueue's line it is the Workload's name (its namespace is the
	// LocalQueue's); in a ClusterQueue's line, NAMESPACE/NAME.
	Workload string `json:"workload,omitempty"`
}

// Limits of PendingWorkloadOptions.Limit.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// PendingWorkloadsSummary is a page of a queue's pending workloads, in the
// order berth admits them.
//
// +kubebuilder:object:root=true
type PendingWorkloadsSummary struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Total is how many workloads are pending in the queue (in a
	// LocalQueue's summary: in that LocalQueue).
	Total int64 `json:"total"`
	// FairShare is the ClusterQueue's standing in its cohort.
	FairShare FairShare `json:"fairShare"`
	// Items from the requested offset.
	// +listType=atomic
	Items []PendingWorkload `json:"items"`
}

// FairShare is a ClusterQueue's fair-share standing.
type FairShare struct {
	// Cohort of the ClusterQueue, if any.
	Cohort string `json:"cohort,omitempty"`
	// WeightedShare is the dominant share of what the queue borrows divided
	// by its weight, as a decimal; "+Inf" when a queue of weight 0 borrows.
	WeightedShare string `json:"weightedShare"`
	// ClusterQueuesAhead counts the queues with pending work that are served
	// before this one.
	ClusterQueuesAhead int32 `json:"clusterQueuesAhead"`
}

// PendingWorkload is one pending workload: where it stands in line and why
// it is not admitted yet. Its metadata names the Workload.
type PendingWorkload struct {
	metav1.ObjectMeta `json:"metadata"`
	// Job is the object the Workload stands for.
	Job JobReference `json:"job,omitempty"`
	// LocalQueue the workload was submitted to.
	LocalQueue string `json:"localQueue"`
	// Priority the queue orders it by.
	Priority int32 `json:"priority"`
	// PositionInClusterQueue and PositionInLocalQueue count the pending
	// workloads admitted before it (0: next).
	PositionInClusterQueue int32 `json:"positionInClusterQueue"`
	PositionInLocalQueue   int32 `json:"positionInLocalQueue"`
	// Reason and Message say why it waits, as berth would write them now.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Shortfalls are, per flavor tried, the resources that do not fit.
	// +listType=atomic
	Shortfalls []Shortfall `json:"shortfalls,omitempty"`
	// Preemption says what admitting it by preemption would take.
	Preemption Preemption `json:"preemption"`
	// Booking is its latest capacity booking, if it made one.
	Booking *Booking `json:"booking,omitempty"`
}

// JobReference names a Workload's job.
type JobReference struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name,omitempty"`
}

// Shortfall is one resource of one flavor that does not fit.
type Shortfall struct {
	Flavor   string `json:"flavor"`
	Resource string `json:"resource"`
	// Requested by the whole workload; Available to its ClusterQueue now,
	// own unused quota and what it may borrow.
	Requested resource.Quantity `json:"requested"`
	Available resource.Quantity `json:"available"`
}

// Preemption is what admitting a workload by preemption would take.
type Preemption struct {
	// Possible: the ClusterQueue's policy allows victims that make room.
	Possible bool `json:"possible"`
	// Victims, as namespace/name of their Workloads, in selection order.
	// +listType=atomic
	Victims []string `json:"victims,omitempty"`
	Message string   `json:"message,omitempty"`
}

// Booking is a pending workload's latest capacity booking.
type Booking struct {
	Attempt  int32  `json:"attempt"`
	Failures int32  `json:"failures,omitempty"`
	State    string `json:"state"`
	Flavor   string `json:"flavor,omitempty"`
	// Domain of the latest attempt, one value per topology level; empty
	// when the booking was not pinned.
	// +listType=atomic
	Domain []string `json:"domain,omitempty"`
	// FailedDomains are avoided by the next attempt.
	// +listType=atomic
	FailedDomains [][]string `json:"failedDomains,omitempty"`
	// RetryAfter is when the next attempt may start.
	RetryAfter *metav1.Time `json:"retryAfter,omitempty"`
}
