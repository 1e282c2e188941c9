package autoscaler

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// PoolReconciler keeps each CapacityPool's status.nodes (its existing
// nodes) and status.provisioning (nodes being created for requests) up to
// date.
type PoolReconciler struct {
	// Client reads the cache and writes pool status.
	Client client.Client
}

// Register adds the reconciler to mgr: it watches pools, their nodes and
// the requests that scale them up.
func (r *PoolReconciler) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("capacitypool").
		For(&berthv1.CapacityPool{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if p := o.GetLabels()[berthv1.CapacityPoolLabel]; p != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: p}}}
			}
			return nil
		})).
		Watches(&autoscalingv1.ProvisioningRequest{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			pr, ok := o.(*autoscalingv1.ProvisioningRequest)
			if !ok {
				return nil
			}
			var out []reconcile.Request
			for _, p := range poolsOf(NewNodesOf(pr)) {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: p}})
			}
			return out
		})).
		Complete(r)
}

// +kubebuilder:rbac:groups=berth.dev,resources=capacitypools,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=capacitypools/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Reconcile counts one pool's nodes and in-flight nodes and writes them
// when they changed.
func (r *PoolReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cp := &berthv1.CapacityPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, cp); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.MatchingLabels{berthv1.CapacityPoolLabel: cp.Name}); err != nil {
		return reconcile.Result{}, err
	}
	reqs := &autoscalingv1.ProvisioningRequestList{}
	if err := r.Client.List(ctx, reqs); err != nil {
		return reconcile.Result{}, err
	}
	existing := map[string]bool{}
	for _, n := range nodes.Items {
		existing[n.Name] = true
	}
	before := cp.DeepCopy()
	cp.Status.Nodes = int32(len(nodes.Items))
	cp.Status.Provisioning = InFlight(cp.Name, reqs.Items, existing)
	if equality.Semantic.DeepEqual(before.Status, cp.Status) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.Client.Status().Patch(ctx, cp, client.MergeFrom(before))
}

// InFlight counts the nodes of pool that requests are scaling up and that
// do not exist yet.
func InFlight(pool string, reqs []autoscalingv1.ProvisioningRequest, existing map[string]bool) int32 {
	var n int32
	for i := range reqs {
		if PhaseOf(&reqs[i]) != PhaseScalingUp {
			continue
		}
		for _, nn := range NewNodesOf(&reqs[i]) {
			if nn.Pool == pool && !existing[nn.Name] {
				n++
			}
		}
	}
	return n
}
