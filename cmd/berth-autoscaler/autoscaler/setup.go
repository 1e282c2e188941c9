// Package autoscaler is a stand-in for cluster-autoscaler's
// ProvisioningRequest support, for clusters whose nodes are kwok fakes:
// local demos, berth's e2e suite and users' kwok or kind clusters. It
// answers check-capacity.autoscaling.x-k8s.io requests from existing nodes
// and best-effort-atomic-scale-up.autoscaling.x-k8s.io requests by
// creating, all or nothing, fake nodes from berth's CapacityPools (one pool
// is one node group), and books the capacity it found or created until the
// booking expires. It answers as cluster-autoscaler 1.35 does — no capacity
// is Provisioned=False/CapacityIsNotFound, retried with a backoff and never
// Failed; Provisioned=True as soon as the nodes are asked for, before they
// exist — so that what works against it works against the real one.
// With Options.CapacityBufferController and CapacityBufferPodInjection it
// also serves CapacityBuffers: a controller resolves each buffer's
// template and size into its status (BufferReconciler), and a loop keeps
// the buffers' fake pods' room provisioned (BufferLoop). With
// Options.ScaleUpUnschedulablePods the same loop scales up for the pods
// kube-scheduler marked unschedulable, as cluster-autoscaler does.
//
// Decisions are pure functions (Place, Shortfall, Booked, View) of a
// snapshot, built on berth's shared model of cluster-autoscaler
// (cmd/internal/autoscale: answers, fit, estimator, expander, backoffs),
// which the coordination simulator runs too; the reconcilers read the
// snapshot and write the outcome. Every
// decision is recorded in the request's status, so a restarted autoscaler
// carries on where it stopped. docs/autoscaler.md describes the behaviour
// and how it differs from cluster-autoscaler's.
package autoscaler

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/cmd/internal/autoscale"
	"github.com/berth-dev/berth/controllers/capacity"
)

// Annotations that inject faults and latency, and that the autoscaler
// writes.
const (
	// StockoutAnnotation "true" on a CapacityPool says its cloud is out of
	// stock: no scale-up uses the pool, so a request only it could serve
	// is answered Provisioned=False/CapacityIsNotFound and retried, as
	// cluster-autoscaler answers when a node group cannot grow.
	StockoutAnnotation = "autoscaler.berth.dev/stockout"
	// PartialFailureAnnotation "true" on a CapacityPool makes the cloud
	// deliver only half the nodes of a scale-up that was already answered
	// Provisioned: the others never join, as when instances fail to launch
	// after a node group was resized.
	PartialFailureAnnotation = "autoscaler.berth.dev/partial-failure"
	// RevokeAnnotation "true" on a provisioned ProvisioningRequest revokes
	// its capacity: CapacityRevoked=True and the booking ends. The OSS
	// cluster-autoscaler never does this; the stand-in does it only with
	// Options.AllowRevocation (--allow-revocation).
	RevokeAnnotation = "autoscaler.berth.dev/revoke"
	// LatencyAnnotation on a CapacityPool (a Go duration, e.g. "30s")
	// overrides Options.ProvisioningLatency for its nodes.
	LatencyAnnotation = "autoscaler.berth.dev/provisioning-latency"
	// CreatedForAnnotation on a node the autoscaler created names the
	// request (namespace/name) it was created for.
	CreatedForAnnotation = "autoscaler.berth.dev/provisioning-request"
	// BufferNodeAnnotation on a node the autoscaler created for a
	// CapacityBuffer names the buffer (namespace/name). Until such a node
	// is Ready it is room the buffer's fake pods count on, as
	// cluster-autoscaler counts a node group's upcoming nodes.
	BufferNodeAnnotation = "autoscaler.berth.dev/capacity-buffer"
	// BufferPendingAnnotation on a CapacityBuffer, written by the
	// autoscaler, lists the nodes a scale-up for the buffer decided and
	// has not created yet, as a JSON list of {"pool", "node", "due"} (due:
	// RFC 3339, when the provisioning latency has passed). A restarted
	// autoscaler creates them; they count against their pools' maxNodes.
	BufferPendingAnnotation = "autoscaler.berth.dev/pending-nodes"
	// KwokNodeAnnotation makes kwok play the kubelet of a node.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
)

// consumerIndex indexes pods by the request (namespace/name) they consume.
const consumerIndex = "autoscaler.berth.dev/consumes"

// Options configure the autoscaler.
type Options struct {
	// Clock is read for every decision that depends on time: provisioning
	// latency, booking expiry. Tests inject a fake one.
	Clock clock.PassiveClock
	// RetryInterval is how often a request that waits for time to pass is
	// looked at again: nodes still to be created, a booking that may
	// expire. A clock that jumps (a test's fake one) is noticed within it.
	RetryInterval time.Duration
	// RetryBackoff is the wait before a request answered CapacityIsNotFound
	// is tried again; it doubles after each try, up to MaxRetryBackoff
	// (cluster-autoscaler: 1 minute and 10 minutes).
	RetryBackoff, MaxRetryBackoff time.Duration
	// BookingTTL is how long after Provisioned a request books its
	// capacity; then it gets BookingExpired=True, consumed or not
	// (cluster-autoscaler: 10 minutes, not configurable).
	BookingTTL time.Duration
	// ProvisioningLatency is how long after the scale-up the nodes join,
	// unless a pool sets LatencyAnnotation.
	ProvisioningLatency time.Duration
	// ScanInterval is the autoscaler's loop: at most one request is answered
	// or tried again per interval, as cluster-autoscaler handles one
	// ProvisioningRequest per --scan-interval (10 s), so many requests
	// queue. 0 answers every request as soon as it is seen (tests on a fake
	// clock).
	ScanInterval time.Duration
	// NodeGroupBackoff is how long a pool whose scale-up failed (its cloud
	// out of stock) is no option for a scale-up, as cluster-autoscaler
	// backs off a node group (--initial-node-group-backoff-duration, 5
	// minutes). 0 never backs a pool off: each try may choose it again.
	NodeGroupBackoff time.Duration
	// AllowRevocation lets RevokeAnnotation revoke a booking: a fault the
	// OSS cluster-autoscaler never produces.
	AllowRevocation bool
	// CapacityBufferController runs the CapacityBuffer controller
	// (cluster-autoscaler's --capacity-buffer-controller-enabled): it
	// resolves each buffer's pod template and replica count into its
	// status. Off by default, as in cluster-autoscaler.
	CapacityBufferController bool
	// CapacityBufferPodInjection keeps ready buffers' capacity
	// provisioned: once per loop (ScanInterval, or RetryInterval when that
	// is 0) their fake pods are fitted and the rest scaled up
	// (cluster-autoscaler's --capacity-buffer-pod-injection-enabled). Off
	// by default. With both off, CapacityBuffers are never read, so their
	// CRD need not be installed.
	CapacityBufferPodInjection bool
	// ScaleUpUnschedulablePods scales up for pods kube-scheduler marked
	// unschedulable (PodScheduled=False, reason Unschedulable), as
	// cluster-autoscaler always does: once per loop, in the loop of the
	// buffers' pod injection, one ordinary scale-up of one pool for those
	// that fit no free room (pending.go). Off in the zero value, so
	// in-process users opt in; berth-autoscaler's
	// --scale-up-unschedulable-pods turns it on by default.
	ScaleUpUnschedulablePods bool
	// ExpendablePodsPriorityCutoff: pods whose spec.priority is below it
	// are expendable and never scaled up for (cluster-autoscaler's
	// --expendable-pods-priority-cutoff). nil means cluster-autoscaler's
	// default, DefaultExpendablePodsPriorityCutoff (-10).
	ExpendablePodsPriorityCutoff *int32
}

// DefaultOptions are cluster-autoscaler's timings, which berth-autoscaler
// runs with by default. ScaleUpUnschedulablePods stays off here, so
// in-process users (the demo) keep their behaviour unless they opt in;
// the binary's --scale-up-unschedulable-pods defaults to true.
func DefaultOptions() Options {
	return Options{
		Clock:               clock.RealClock{},
		RetryInterval:       10 * time.Second,
		RetryBackoff:        autoscale.InitialBackoff,
		MaxRetryBackoff:     autoscale.MaxBackoff,
		BookingTTL:          autoscale.BookingTTL,
		ProvisioningLatency: 2 * time.Second,
		ScanInterval:        autoscale.ScanInterval,
		NodeGroupBackoff:    autoscale.NodeGroupBackoff,
	}
}

// Setup registers the autoscaler's reconcilers with mgr, whose scheme must
// know core, berth and autoscaling.x-k8s.io/v1 types, and, with either
// CapacityBuffer option, autoscaling.x-k8s.io/v1beta1's CapacityBuffer.
func Setup(mgr ctrl.Manager, o Options) error {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.RetryInterval <= 0 || o.BookingTTL <= 0 || o.RetryBackoff <= 0 || o.MaxRetryBackoff < o.RetryBackoff || o.ProvisioningLatency < 0 || o.ScanInterval < 0 || o.NodeGroupBackoff < 0 {
		return errors.New("autoscaler: RetryInterval, RetryBackoff and BookingTTL must be positive, MaxRetryBackoff at least RetryBackoff, ProvisioningLatency, ScanInterval and NodeGroupBackoff not negative")
	}
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, consumerIndex, func(o client.Object) []string {
		if name := o.GetAnnotations()[autoscalingv1.ProvisioningRequestPodAnnotationKey]; name != "" {
			return []string{o.GetNamespace() + "/" + name}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing pods by the request they consume: %w", err)
	}
	if o.ScaleUpUnschedulablePods {
		if err := indexUnschedulable(context.Background(), mgr, o.expendableCutoff()); err != nil {
			return err
		}
	}
	// Like cluster-autoscaler, the stand-in never writes CapacityPool
	// status: berth must not need it.
	r := &RequestReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Options: o, selectors: capacity.NewSelectors(),
		buffers: o.CapacityBufferPodInjection, pods: o.ScaleUpUnschedulablePods}
	if err := r.Register(mgr); err != nil {
		return fmt.Errorf("registering the ProvisioningRequest reconciler: %w", err)
	}
	if o.CapacityBufferController {
		b := &BufferReconciler{Client: mgr.GetClient(), Clock: o.Clock}
		if err := b.Register(mgr); err != nil {
			return fmt.Errorf("registering the CapacityBuffer controller: %w", err)
		}
	}
	if o.CapacityBufferPodInjection || o.ScaleUpUnschedulablePods {
		if err := mgr.Add(&BufferLoop{Requests: r}); err != nil {
			return fmt.Errorf("adding the loop for buffers and unschedulable pods: %w", err)
		}
	}
	return nil
}

// Backoff is the wait after the retries+1-th answer CapacityIsNotFound:
// RetryBackoff doubled for each earlier one, up to MaxRetryBackoff.
func (o Options) Backoff(retries int) time.Duration {
	return autoscale.Backoff(o.RetryBackoff, o.MaxRetryBackoff, retries)
}
