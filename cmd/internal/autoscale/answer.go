// Package autoscale is berth's model of cluster-autoscaler 1.35's
// decisions on ProvisioningRequests and pending pods, shared by the
// stand-in autoscaler (cmd/berth-autoscaler) and the coordination
// simulator (cmd/internal/sim) so that the two cannot drift apart. It is
// pure: no client, no clock; callers bring their own view of nodes, node
// groups and pods through small callbacks, and write what it decides.
//
// What it models, read from cluster-autoscaler's source
// (cluster-autoscaler/provisioningrequest: besteffortatomic,
// checkcapacity, conditions; core/scaleup/orchestrator; estimator;
// expander/waste) and listed in docs/coordination.md and
// docs/provisioning.md:
//
//   - the answer to one look at a request of each class (Decide) and the
//     conditions it writes (Outcome.Condition, Accepted, BookingExpired);
//   - the request's retry backoff (Backoff) and a node group's backoff
//     after it failed to grow (NodeGroupBackoff);
//   - fitting pods on free nodes (FirstFit) and on new nodes of one node
//     group, all or nothing for best-effort-atomic-scale-up (Estimate);
//   - the least-waste expander choosing among node groups (Best).
package autoscale

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
)

// Reasons cluster-autoscaler writes on a request's conditions.
const (
	ReasonAccepted           = "Accepted"
	ReasonCapacityFound      = "CapacityIsFound"
	ReasonCapacityNotFound   = "CapacityIsNotFound"
	ReasonProvisioned        = "CapacityIsProvisioned"
	ReasonFailedToCreatePods = "FailedToCreatePods"
	ReasonBookingExpired     = "CapacityReservationTimeExpired"
)

// Messages cluster-autoscaler writes with those reasons.
const (
	MsgAccepted         = "ProvisioningRequest is accepted by ClusterAutoscaler"
	MsgCapacityFound    = "Capacity is found in the cluster"
	MsgCapacityNotFound = "Capacity is not found, CA will try to find it later."
	MsgBookingExpired   = "Capacity reservation time is expired"
)

// cluster-autoscaler's timings: flags' defaults, and the booking's
// constant.
const (
	// ScanInterval is --scan-interval: one ProvisioningRequest is looked
	// at per loop.
	ScanInterval = 10 * time.Second
	// InitialBackoff and MaxBackoff are
	// --provisioning-request-initial-backoff-time and
	// --provisioning-request-max-backoff-time: a request answered
	// CapacityIsNotFound is looked at again after InitialBackoff, doubled
	// for each earlier try, up to MaxBackoff.
	InitialBackoff = time.Minute
	MaxBackoff     = 10 * time.Minute
	// BookingTTL is how long a provisioned request books its capacity,
	// counted from Provisioned=True (a constant, not a flag).
	BookingTTL = 10 * time.Minute
	// NodeGroupBackoff is --initial-node-group-backoff-duration: a node
	// group that failed to grow is not an option for that long.
	NodeGroupBackoff = 5 * time.Minute
	// ScaleDownUnneeded is --scale-down-unneeded-time: how long a node
	// must be unneeded before it is removed.
	ScaleDownUnneeded = 10 * time.Minute
)

// Supported reports whether cluster-autoscaler handles requests of class.
func Supported(class string) bool {
	return class == autoscalingv1.ProvisioningClassCheckCapacity || class == autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp
}

// ScalesUp reports whether requests of class may grow node groups:
// best-effort-atomic-scale-up does, check-capacity answers from free
// capacity only.
func ScalesUp(class string) bool {
	return class == autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp
}

// Backoff is the wait after the (retries+1)-th answer CapacityIsNotFound:
// initial doubled for each earlier answer, up to most.
func Backoff(initial, most time.Duration, retries int) time.Duration {
	d := initial
	for i := 0; i < retries && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// Outcome is the answer to one look at a request.
type Outcome int

// The outcomes.
const (
	// NotFound: Provisioned=False/CapacityIsNotFound, looked at again
	// after the request's backoff.
	NotFound Outcome = iota
	// StockedOut is NotFound because the node group the expander chose
	// failed to grow: the caller also backs the group off for
	// NodeGroupBackoff, so the next look chooses among the others.
	StockedOut
	// Found: Provisioned=True/CapacityIsFound, every pod fits free
	// capacity, which is booked.
	Found
	// Provisioned: Provisioned=True/CapacityIsProvisioned, the node group
	// was resized; the nodes join later and are booked meanwhile.
	Provisioned
	// Failed: Failed=True, for a check-capacity request with noRetry that
	// does not fit. Nothing more happens.
	Failed
)

// Look is what one look at a request found.
type Look struct {
	// Class is the request's provisioningClassName.
	Class string
	// NoRetry is the request's parameters.noRetry == "true" (read by
	// check-capacity only).
	NoRetry bool
	// FitsFree: every pod fits free matching capacity (what other
	// requests booked is not free).
	FitsFree bool
	// Chosen is the option the expander chose for the pods left over,
	// among node groups that can hold all of them (Estimate, all or
	// nothing); nil when none can. Only best-effort-atomic-scale-up asks.
	Chosen *Option
}

// Decide is the outcome of l, as besteffortatomic/provisioning_class.go
// and checkcapacity/provisioningclass.go decide it: free capacity first,
// then one node group for the rest, all or nothing; never Failed for a
// lack of capacity but for check-capacity's noRetry.
func Decide(l Look) Outcome {
	switch {
	case l.FitsFree:
		return Found
	case !ScalesUp(l.Class):
		if l.NoRetry {
			return Failed
		}
		return NotFound
	case l.Chosen == nil:
		return NotFound
	case l.Chosen.OutOfStock:
		return StockedOut
	}
	return Provisioned
}

// Condition is the condition cluster-autoscaler writes for o at now;
// detail, when not empty, says why there is no capacity (appended in
// parentheses: not part of cluster-autoscaler's message).
func (o Outcome) Condition(detail string, now time.Time) metav1.Condition {
	c := metav1.Condition{Type: autoscalingv1.Provisioned, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now)}
	switch o {
	case Found:
		c.Reason, c.Message = ReasonCapacityFound, MsgCapacityFound
	case Provisioned:
		// cluster-autoscaler says "found" for a scale-up too.
		c.Reason, c.Message = ReasonProvisioned, MsgCapacityFound
	case Failed:
		c.Type, c.Reason, c.Message = autoscalingv1.Failed, ReasonCapacityNotFound, "capacity is not found"
		if detail != "" {
			c.Message += ": " + detail
		}
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonCapacityNotFound, MsgCapacityNotFound
		if detail != "" {
			c.Message += " (" + detail + ")"
		}
	}
	return c
}

// Accepted is the condition a loop writes when it first picks a request.
func Accepted(now time.Time) metav1.Condition {
	return metav1.Condition{Type: autoscalingv1.Accepted, Status: metav1.ConditionTrue, Reason: ReasonAccepted,
		Message: MsgAccepted, LastTransitionTime: metav1.NewTime(now)}
}

// BookingExpired is the condition written BookingTTL after
// Provisioned=True, whether or not pods consumed the capacity.
func BookingExpired(now time.Time) metav1.Condition {
	return metav1.Condition{Type: autoscalingv1.BookingExpired, Status: metav1.ConditionTrue, Reason: ReasonBookingExpired,
		Message: MsgBookingExpired, LastTransitionTime: metav1.NewTime(now)}
}
