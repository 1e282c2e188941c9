package autoscaler

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// createNodes creates a provisioned scale-up's nodes once the provisioning
// latency of its pools has passed. A pool with PartialFailureAnnotation gets
// only half of them: the others never join, as when a cloud fails to launch
// instances after the node group was resized; the request stays
// Provisioned, as cluster-autoscaler's does, and its booking expires.
func (r *RequestReconciler) createNodes(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, now time.Time) (reconcile.Result, error) {
	started, err := time.Parse(time.RFC3339Nano, detail(pr, DetailScaleUpStarted))
	if err != nil {
		started = now
	}
	newNodes := NewNodesOf(pr)
	pools := map[string]*berthv1.CapacityPool{}
	latency := time.Duration(0)
	for _, n := range newNodes {
		if _, seen := pools[n.Pool]; seen {
			continue
		}
		cp := &berthv1.CapacityPool{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: n.Pool}, cp); err != nil {
			if !apierrors.IsNotFound(err) {
				return reconcile.Result{}, err
			}
			cp = nil // deleted during the scale-up: its nodes never come
		}
		pools[n.Pool] = cp
		if cp != nil {
			latency = max(latency, r.latency(ctx, cp))
		}
	}
	if left := started.Add(latency).Sub(now); left > 0 {
		return reconcile.Result{RequeueAfter: r.wait(left)}, nil
	}
	created := map[string]int{}
	for _, n := range newNodes {
		cp := pools[n.Pool]
		if cp == nil {
			continue
		}
		if cp.Annotations[PartialFailureAnnotation] == "true" && created[n.Pool] >= countIn(newNodes, n.Pool)/2 {
			continue
		}
		if err := r.createNode(ctx, cp, NodeFor(cp, n.Name, key(pr))); err != nil {
			return reconcile.Result{}, err
		}
		created[n.Pool]++
	}
	if total(created) < len(newNodes) {
		log.FromContext(ctx).Info("a scale-up delivered fewer nodes than it asked for", "request", key(pr), "created", total(created), "asked", len(newNodes))
	}
	if err := r.write(ctx, pr, func(p *autoscalingv1.ProvisioningRequest) { setDetail(p, DetailNodesCreated, "true") }); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: r.wait(ExpiresAt(pr, r.Options.BookingTTL).Sub(now))}, nil
}

func countIn(nodes []NewNode, pool string) int {
	n := 0
	for _, x := range nodes {
		if x.Pool == pool {
			n++
		}
	}
	return n
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// latency is the pool's provisioning latency.
func (r *RequestReconciler) latency(ctx context.Context, cp *berthv1.CapacityPool) time.Duration {
	s, ok := cp.Annotations[LatencyAnnotation]
	if !ok {
		return r.Options.ProvisioningLatency
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		log.FromContext(ctx).Info("ignoring invalid provisioning latency", "pool", cp.Name, "value", s)
		return r.Options.ProvisioningLatency
	}
	return d
}

// createNode creates node, a node of the pool made by NodeFor, and the
// ResourceSlices of its template's devices; both survive a retry after a
// partial failure. Requests' and buffers' scale-ups share it.
func (r *RequestReconciler) createNode(ctx context.Context, cp *berthv1.CapacityPool, node *corev1.Node) error {
	name, owner := node.Name, createdFor(node)
	err := r.Client.Create(ctx, node)
	switch {
	case apierrors.IsAlreadyExists(err):
		if len(cp.Spec.NodeTemplate.Devices) == 0 {
			return nil
		}
		if err := r.Reader.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
			return fmt.Errorf("reading node %s to publish its devices: %w", name, err)
		}
	case err != nil:
		return fmt.Errorf("creating node %s for %s: %w", name, owner, err)
	}
	return r.createSlices(ctx, node, owner, SlicesFor(cp, node))
}

// createdFor names what a node the autoscaler creates is for, in errors.
func createdFor(node *corev1.Node) string {
	if b := node.Annotations[BufferNodeAnnotation]; b != "" {
		return "CapacityBuffer " + b
	}
	if node.Annotations[PodsNodeAnnotation] == "true" {
		return "unschedulable pods"
	}
	return node.Annotations[CreatedForAnnotation]
}
