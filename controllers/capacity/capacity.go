// Package capacity keeps the admission engine's view of the cluster's
// capacity current: every ResourceFlavor's topology levels, and every
// schedulable node's flavors, topology labels and free capacity
// (allocatable minus the requests of the pods bound there).
//
// Bound pods are read from a cache of their own that holds only what the
// count needs (node, phase, requests, labels), so that berth's main cache
// keeps holding only queued pods.
package capacity

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/flavors"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// nodeNameIndex indexes the bound-pod cache by spec.nodeName.
const nodeNameIndex = "spec.nodeName"

// Sink receives capacity; the scheduler implements it.
type Sink interface {
	UpsertFlavor(f admission.Flavor) error
	DeleteFlavor(name string)
	UpsertNode(n admission.Node) error
	DeleteNode(name string)
	UpsertPool(p admission.Pool) error
	DeletePool(name string)
}

// Store is what the capacity reconcilers read and write through the
// manager's cache: Nodes, ResourceFlavors, CapacityPools and the pools'
// status. The manager's client implements it.
type Store interface {
	client.Reader
	Status() client.SubResourceWriter
}

// Reconciler feeds Sink from Nodes, bound Pods and ResourceFlavors.
type Reconciler struct {
	client Store
	// pods reads bound pods by nodeNameIndex; podCache is the cache behind
	// it, watched and waited for (nil in unit tests, which read pods from
	// a fake client).
	pods     client.Reader
	podCache cache.Cache
	sink     Sink
	devices  *devices
	// placeholders is berth's own namespace: only placeholder pods there
	// are headroom (see free).
	placeholders string
}

// New creates the bound-pod cache and adds it to the manager. DRA devices
// of the mapped DeviceClasses count as node capacity (devices.go); an empty
// mapping counts none and reads no DRA objects. placeholderNamespace is
// the namespace berth keeps its headroom placeholder pods in.
func New(ctx context.Context, mgr ctrl.Manager, sink Sink, deviceClasses jobs.DeviceClassMapping, placeholderNamespace string) (*Reconciler, error) {
	pods, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(),
		Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Field: fields.OneTermNotEqualSelector("spec.nodeName", ""), Transform: stripPod},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the bound-pod cache: %w", err)
	}
	if err := pods.IndexField(ctx, &corev1.Pod{}, nodeNameIndex, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		return nil, fmt.Errorf("indexing bound pods by node: %w", err)
	}
	if err := mgr.Add(pods); err != nil {
		return nil, fmt.Errorf("adding the bound-pod cache: %w", err)
	}
	devices, err := newDevices(ctx, mgr, deviceClasses, pods)
	if err != nil {
		return nil, err
	}
	return &Reconciler{client: mgr.GetClient(), pods: pods, podCache: pods, sink: sink, devices: devices,
		placeholders: placeholderNamespace}, nil
}

// stripPod keeps only what the capacity count reads: a cluster's pods are
// many, and their specs large.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, Labels: p.Labels, ResourceVersion: p.ResourceVersion},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName, Overhead: p.Spec.Overhead,
			Containers: stripContainers(p.Spec.Containers), InitContainers: stripContainers(p.Spec.InitContainers)},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
	return out, nil
}

func stripContainers(cs []corev1.Container) []corev1.Container {
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests}, RestartPolicy: c.RestartPolicy}
	}
	return out
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=capacitypools,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=capacitypools/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// Name names the controller.
func (r *Reconciler) Name() string { return "capacity" }

// Register starts the node and flavor controllers.
func (r *Reconciler) Register(_ context.Context, mgr ctrl.Manager) error {
	nodes := ctrl.NewControllerManagedBy(mgr).
		Named("capacity-node").
		For(&corev1.Node{}).
		WatchesRawSource(source.Kind(r.podCache, &corev1.Pod{}, handler.TypedEnqueueRequestsFromMapFunc(
			func(_ context.Context, p *corev1.Pod) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: p.Spec.NodeName}}}
			}))).
		Watches(&berthv1.ResourceFlavor{}, handler.EnqueueRequestsFromMapFunc(r.allNodes))
	err := r.devices.watch(nodes, r.allNodes).Complete(reconcile.Func(r.reconcileNode))
	if err != nil {
		return fmt.Errorf("building the node capacity controller: %w", err)
	}
	pools := ctrl.NewControllerManagedBy(mgr).
		Named("capacity-pool").
		For(&berthv1.CapacityPool{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(poolOfNode))
	err = r.devices.watchPools(pools, r.allPools).Complete(reconcile.Func(r.reconcilePool))
	if err != nil {
		return fmt.Errorf("building the capacity pool controller: %w", err)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("capacity-flavor").
		For(&berthv1.ResourceFlavor{}).
		Complete(reconcile.Func(r.reconcileFlavor))
	if err != nil {
		return fmt.Errorf("building the flavor topology controller: %w", err)
	}
	return nil
}

func (r *Reconciler) allNodes(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.every(ctx, &corev1.NodeList{}, "nodes after a ResourceFlavor change")
}

// every lists the objects of a cluster-scoped kind into list and returns a
// request for each; what names them in the error logged when the list fails.
func (r *Reconciler) every(ctx context.Context, list client.ObjectList, what string) []reconcile.Request {
	if err := r.client.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing "+what)
		return nil
	}
	var out []reconcile.Request
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: o.(client.Object).GetName()}})
		return nil
	})
	return out
}

func (r *Reconciler) reconcileFlavor(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	rf, ok, err := flavors.New(r.client).Get(ctx, req.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !ok {
		r.sink.DeleteFlavor(req.Name)
		return reconcile.Result{}, nil
	}
	// The API validates the levels; an error here is a bug, not bad input.
	return reconcile.Result{}, r.sink.UpsertFlavor(lifecycle.FlavorToEngine(rf))
}

func (r *Reconciler) reconcilePool(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &berthv1.CapacityPool{}
	if err := r.client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			r.sink.DeletePool(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading CapacityPool %s: %w", req.Name, err)
	}
	n, err := r.poolNodes(ctx, p.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	pool, err := r.poolToEngine(ctx, p, n)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.sink.UpsertPool(pool); err != nil {
		return reconcile.Result{}, err
	}
	if p.Status.Nodes == n {
		return reconcile.Result{}, nil
	}
	// Written only when the count changes: nodes join and leave rarely.
	base := p.DeepCopy()
	p.Status.Nodes = n
	if err := r.client.Status().Patch(ctx, p, client.MergeFrom(base)); err != nil {
		return reconcile.Result{}, fmt.Errorf("writing the node count of CapacityPool %s: %w", p.Name, err)
	}
	return reconcile.Result{}, nil
}

// poolNodes counts the nodes labelled as the pool's. berth counts them
// itself rather than trusting the pool's status, which only an autoscaler
// integration that writes it (the stand-in does) keeps current.
func (r *Reconciler) poolNodes(ctx context.Context, pool string) (int32, error) {
	nodes := &corev1.NodeList{}
	if err := r.client.List(ctx, nodes, client.MatchingLabels{berthv1.CapacityPoolLabel: pool}); err != nil {
		return 0, fmt.Errorf("listing the nodes of CapacityPool %s: %w", pool, err)
	}
	return int32(len(nodes.Items)), nil
}

// poolOfNode maps a node to the pool its label names.
func poolOfNode(_ context.Context, o client.Object) []reconcile.Request {
	if pool, ok := o.GetLabels()[berthv1.CapacityPoolLabel]; ok {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: pool}}}
	}
	return nil
}

func (r *Reconciler) reconcileNode(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := r.client.Get(ctx, req.NamespacedName, node); err != nil {
		if apierrors.IsNotFound(err) {
			r.sink.DeleteNode(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading node %s: %w", req.Name, err)
	}
	rfs, err := flavors.New(r.client).List(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	n, ok, err := r.capacity(ctx, node, rfs)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !ok {
		r.sink.DeleteNode(node.Name)
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.sink.UpsertNode(n)
}

// capacity computes a node's capacity; ok is false when the node cannot
// take pods (not Ready, cordoned) or is of no flavor.
func (r *Reconciler) capacity(ctx context.Context, node *corev1.Node, flavors []berthv1.ResourceFlavor) (admission.Node, bool, error) {
	if node.Spec.Unschedulable || !ready(node) || !node.DeletionTimestamp.IsZero() {
		return admission.Node{}, false, nil
	}
	n := admission.Node{Name: node.Name, Labels: node.Labels, Taints: lifecycle.TaintsToEngine(node.Spec.Taints)}
	for i := range flavors {
		if Matches(&flavors[i], node) {
			n.Flavors = append(n.Flavors, flavors[i].Name)
		}
	}
	if len(n.Flavors) == 0 {
		return admission.Node{}, false, nil
	}
	pods := &corev1.PodList{}
	if err := r.pods.List(ctx, pods, client.MatchingFields{nodeNameIndex: node.Name}); err != nil {
		return admission.Node{}, false, fmt.Errorf("listing pods on node %s: %w", node.Name, err)
	}
	allocatable := node.Status.Allocatable.DeepCopy()
	free := node.Status.Allocatable.DeepCopy()
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, placed := p.Labels[berthv1.PlacementLabel]; placed {
			continue // the engine reserves the capacity of placed gangs itself
		}
		if r.isPlaceholder(p) {
			continue
		}
		for name, q := range jobs.PodRequests(&p.Spec) {
			if f, ok := free[name]; ok {
				f.Sub(q)
				free[name] = f
			}
		}
	}
	if err := r.devices.add(ctx, node, allocatable, free); err != nil {
		return admission.Node{}, false, err
	}
	n.Free, n.Allocatable = lifecycle.CapacityToEngine(free), lifecycle.CapacityToEngine(allocatable)
	return n, true, nil
}

// isPlaceholder reports whether p is one of berth's headroom placeholders,
// whose room is free for the replicas that preempt them; only they
// tolerate the node's taint, so no other gang is placed on it. The label
// alone does not make one: any namespace editor can set it on their own
// pods, and berth would then count a full node as free and place other
// tenants' gangs on it. Only berth's own namespace holds placeholders.
func (r *Reconciler) isPlaceholder(p *corev1.Pod) bool {
	_, labelled := p.Labels[berthv1.HeadroomPlaceholderLabel]
	return labelled && r.placeholders != "" && p.Namespace == r.placeholders
}

func ready(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Matches reports whether the node is of the flavor: it carries the
// flavor's node labels. Its taints do not decide it: the engine gets them
// with the node and keeps off it the pod sets that tolerate them neither by
// their own tolerations nor by the flavor's, which berth adds to the pods
// it releases on the flavor — so pods that tolerate a taint on their own
// may use a node the flavor does not, as the scheduler lets them.
func Matches(rf *berthv1.ResourceFlavor, node *corev1.Node) bool {
	return labels.SelectorFromSet(rf.Spec.NodeLabels).Matches(labels.Set(node.Labels))
}

// Load gives the sink every flavor and node at once; the scheduler calls it
// before its first cycle.
func (r *Reconciler) Load(ctx context.Context) error {
	if !r.podCache.WaitForCacheSync(ctx) || !r.devices.synced(ctx) {
		return errors.New("the bound-pod or ResourceClaim cache did not sync")
	}
	rfs, err := flavors.New(r.client).List(ctx)
	if err != nil {
		return err
	}
	for i := range rfs {
		if err := r.sink.UpsertFlavor(lifecycle.FlavorToEngine(&rfs[i])); err != nil {
			return err
		}
	}
	pools := &berthv1.CapacityPoolList{}
	if err := r.client.List(ctx, pools); err != nil {
		return fmt.Errorf("listing CapacityPools: %w", err)
	}
	for i := range pools.Items {
		n, err := r.poolNodes(ctx, pools.Items[i].Name)
		if err != nil {
			return err
		}
		pool, err := r.poolToEngine(ctx, &pools.Items[i], n)
		if err != nil {
			return err
		}
		if err := r.sink.UpsertPool(pool); err != nil {
			return err
		}
	}
	nodes := &corev1.NodeList{}
	if err := r.client.List(ctx, nodes); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nodes.Items {
		n, ok, err := r.capacity(ctx, &nodes.Items[i], rfs)
		if err != nil {
			return err
		}
		if ok {
			if err := r.sink.UpsertNode(n); err != nil {
				return err
			}
		}
	}
	return nil
}
