package autoscaler

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// finishScaleUp creates a planned scale-up's nodes once the provisioning
// latency of its pools has passed, then sets Provisioned=True; a stockout
// or partial failure fails the request, leaving no node behind.
func (r *RequestReconciler) finishScaleUp(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, now time.Time) (reconcile.Result, error) {
	started, err := time.Parse(time.RFC3339Nano, detail(pr, DetailScaleUpStarted))
	if err != nil {
		started = now
	}
	newNodes := NewNodesOf(pr)
	pools := map[string]*berthv1.CapacityPool{}
	latency := time.Duration(0)
	for _, n := range newNodes {
		if pools[n.Pool] != nil {
			continue
		}
		cp := &berthv1.CapacityPool{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: n.Pool}, cp); err != nil {
			if apierrors.IsNotFound(err) {
				return reconcile.Result{}, r.fail(ctx, pr, fmt.Sprintf("CapacityPool %s was deleted during the scale-up", n.Pool), now)
			}
			return reconcile.Result{}, err
		}
		pools[n.Pool] = cp
		latency = max(latency, r.latency(ctx, cp))
	}
	if left := started.Add(latency).Sub(now); left > 0 {
		return reconcile.Result{RequeueAfter: r.wait(left)}, nil
	}
	for _, name := range poolsOf(newNodes) {
		if pools[name].Annotations[StockoutAnnotation] == "true" {
			return reconcile.Result{}, r.fail(ctx, pr, fmt.Sprintf("pool %s is out of stock: none of the %d nodes could be created", name, len(newNodes)), now)
		}
	}
	partial := false
	for _, cp := range pools {
		partial = partial || cp.Annotations[PartialFailureAnnotation] == "true"
	}
	create := newNodes
	if partial {
		create = newNodes[:len(newNodes)/2]
	}
	for _, n := range create {
		if err := r.Client.Create(ctx, NodeFor(pools[n.Pool], n.Name, key(pr))); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, err
		}
	}
	if partial {
		return reconcile.Result{}, r.rollBack(ctx, pr, create, len(newNodes), now)
	}
	names := make([]string, len(newNodes))
	for i, n := range newNodes {
		names[i] = n.Name
	}
	placement, err := ParsePlacement(detail(pr, DetailPlacement))
	if err != nil {
		return reconcile.Result{}, r.fail(ctx, pr, err.Error(), now)
	}
	return r.provisioned(ctx, pr, placement, ReasonProvisioned,
		fmt.Sprintf("created nodes %s in %s", strings.Join(names, ", "), strings.Join(poolsOf(newNodes), ", ")), now)
}

// rollBack deletes the nodes a partly failed scale-up created and fails
// the request: an atomic scale-up leaves nothing behind.
func (r *RequestReconciler) rollBack(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, created []NewNode, wanted int, now time.Time) error {
	for _, n := range created {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
		if err := r.Client.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return r.fail(ctx, pr, fmt.Sprintf("only %d of %d nodes could be created (partial failure in %s); the scale-up was rolled back and the created nodes deleted",
		len(created), wanted, strings.Join(poolsOf(NewNodesOf(pr)), ", ")), now)
}

// fail sets Failed=True for a scale-up that could not be carried out.
func (r *RequestReconciler) fail(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, msg string, now time.Time) error {
	return r.write(ctx, pr, func(p *autoscalingv1.ProvisioningRequest) {
		setCondition(p, autoscalingv1.Provisioned, metav1.ConditionFalse, ReasonScaleUpFailed, msg, now)
		setCondition(p, autoscalingv1.Failed, metav1.ConditionTrue, ReasonScaleUpFailed, msg, now)
	})
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
