// Package autoscaler is a stand-in for cluster-autoscaler's
// ProvisioningRequest support, for clusters whose nodes are kwok fakes:
// local demos, berth's e2e suite and users' kwok or kind clusters. It
// answers check-capacity.autoscaling.x-k8s.io requests from existing nodes
// and best-effort-atomic-scale-up.autoscaling.x-k8s.io requests by
// creating, all or nothing, fake nodes from berth's CapacityPools (one pool
// is one node group), and books the capacity it found or created until the
// request's pods consume it or the booking expires.
//
// Decisions are pure functions (Place, Shortfall, Booked, View) of a
// snapshot; the reconcilers read the snapshot and write the outcome. Every
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
)

// Annotations that inject faults and latency, and that the autoscaler
// writes.
const (
	// StockoutAnnotation "true" on a CapacityPool makes every scale-up that
	// needs the pool fail when its nodes would be created.
	StockoutAnnotation = "autoscaler.berth.dev/stockout"
	// PartialFailureAnnotation "true" on a CapacityPool makes a scale-up
	// that needs the pool create only part of its nodes, then roll back:
	// the created nodes are deleted and the request fails.
	PartialFailureAnnotation = "autoscaler.berth.dev/partial-failure"
	// RevokeAnnotation "true" on a provisioned ProvisioningRequest revokes
	// its capacity: CapacityRevoked=True and the booking ends.
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
	// RetryInterval is how often a request that waits is looked at again:
	// check-capacity without capacity, a scale-up in flight, a booking
	// that may expire.
	RetryInterval time.Duration
	// BookingTTL is how long a Provisioned request books its capacity
	// unless its pods consume it.
	BookingTTL time.Duration
	// ProvisioningLatency is how long creating nodes takes, unless a pool
	// sets LatencyAnnotation.
	ProvisioningLatency time.Duration
}

// DefaultOptions are the options berth-autoscaler runs with by default.
func DefaultOptions() Options {
	return Options{
		Clock:               clock.RealClock{},
		RetryInterval:       10 * time.Second,
		BookingTTL:          10 * time.Minute,
		ProvisioningLatency: 2 * time.Second,
	}
}

// Setup registers the autoscaler's reconcilers with mgr, whose scheme must
// know core, berth and autoscaling.x-k8s.io/v1 types.
func Setup(mgr ctrl.Manager, o Options) error {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.RetryInterval <= 0 || o.BookingTTL <= 0 || o.ProvisioningLatency < 0 {
		return errors.New("autoscaler: RetryInterval and BookingTTL must be positive, ProvisioningLatency not negative")
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
	r := &RequestReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Options: o}
	if err := r.Register(mgr); err != nil {
		return err
	}
	return (&PoolReconciler{Client: mgr.GetClient()}).Register(mgr)
}

// supported reports whether the autoscaler handles a provisioning class.
func supported(class string) bool {
	return class == autoscalingv1.ProvisioningClassCheckCapacity || class == autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp
}
