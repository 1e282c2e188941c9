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
}

// DefaultOptions are the options berth-autoscaler runs with by default:
// cluster-autoscaler's timings.
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
// know core, berth and autoscaling.x-k8s.io/v1 types.
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
		return err
	}
	// Like cluster-autoscaler, the stand-in never writes CapacityPool
	// status: berth must not need it.
	r := &RequestReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Options: o, selectors: capacity.NewSelectors()}
	return r.Register(mgr)
}

// Backoff is the wait after the retries+1-th answer CapacityIsNotFound:
// RetryBackoff doubled for each earlier one, up to MaxRetryBackoff.
func (o Options) Backoff(retries int) time.Duration {
	return autoscale.Backoff(o.RetryBackoff, o.MaxRetryBackoff, retries)
}
