// Package workload reconciles Workloads into the admission engine: every
// change of a Workload, of its LocalQueue or of its ClusterQueue re-feeds the
// workload to the scheduler, with the facts the engine decides on — whether
// it is active, whether its LocalQueue exists and runs, whether its
// ClusterQueue accepts its namespace. The engine decides whether it may be
// queued and whether a deactivated one is evicted, and the scheduler writes
// those decisions; only a spec the engine refuses is reported here. It also owns the Workload finalizer: a Workload that
// is being deleted, or whose job went away with orphan propagation, keeps
// its quota until no pod of its job runs, and only then goes.
package workload

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/lifecycle/persist"
)

// Field indexes this package registers.
const (
	// QueueNameIndex indexes Workloads by spec.queueName.
	QueueNameIndex = "spec.queueName"
	// ClusterQueueIndex indexes LocalQueues by spec.clusterQueue.
	ClusterQueueIndex = "spec.clusterQueue"
	// AdmittedInIndex indexes Workloads by the ClusterQueue of their
	// admission.
	AdmittedInIndex = "status.admission.clusterQueue"
)

// podsPoll is how often a Workload that waits for its job's pods to go is
// looked at again: berth does not cache a job's pods.
const podsPoll = 5 * time.Second

// Reconciler feeds Workloads to the scheduler.
type Reconciler struct {
	client   Store
	reader   client.Reader
	sched    Engine
	recorder events.EventRecorder
	writer   persist.Writer
}

// NewReconciler returns a Workload reconciler; reader is an uncached reader.
func NewReconciler(c Store, reader client.Reader, sched Engine, recorder events.EventRecorder, clk clock.PassiveClock) *Reconciler {
	return &Reconciler{client: c, reader: reader, sched: sched, recorder: recorder,
		writer: persist.Writer{Client: c, Reader: reader, Clock: clk}}
}

// Name of the controller.
func (r *Reconciler) Name() string { return "workload" }

// Register adds the reconciler and its indexes to mgr.
func (r *Reconciler) Register(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &berthv1.Workload{}, QueueNameIndex, func(o client.Object) []string {
		return []string{o.(*berthv1.Workload).Spec.QueueName}
	}); err != nil {
		return fmt.Errorf("indexing workloads by queue: %w", err)
	}
	if err := idx.IndexField(ctx, &berthv1.Workload{}, AdmittedInIndex, func(o client.Object) []string {
		if a := o.(*berthv1.Workload).Status.Admission; a != nil {
			return []string{a.ClusterQueue}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing workloads by admission: %w", err)
	}
	if err := idx.IndexField(ctx, &berthv1.LocalQueue{}, ClusterQueueIndex, func(o client.Object) []string {
		return []string{o.(*berthv1.LocalQueue).Spec.ClusterQueue}
	}); err != nil {
		return fmt.Errorf("indexing local queues by cluster queue: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.Name()).
		For(&berthv1.Workload{}).
		// Status writes of queues change nothing for their workloads.
		Watches(&berthv1.LocalQueue{}, handler.EnqueueRequestsFromMapFunc(r.forLocalQueue),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&berthv1.ClusterQueue{}, handler.EnqueueRequestsFromMapFunc(r.forClusterQueue),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A namespace relabelled out of (or into) a ClusterQueue's
		// namespaceSelector changes where its pending workloads may queue.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.forNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Complete(r)
}

// +kubebuilder:rbac:groups=berth.dev,resources=workloads,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=berth.dev,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=berth.dev,resources=workloads/finalizers,verbs=update
// +kubebuilder:rbac:groups=berth.dev,resources=localqueues;clusterqueues,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// Reconcile feeds one Workload to the scheduler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	wl := &berthv1.Workload{}
	if err := r.client.Get(ctx, req.NamespacedName, wl); err != nil {
		if apierrors.IsNotFound(err) {
			r.sched.DeleteWorkload(lifecycle.KeyOf(&berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}))
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading workload %s: %w", req, err)
	}
	if gone(wl) {
		if lifecycle.HoldsQuota(lifecycle.PhaseOf(wl)) {
			if _, err := r.sched.SyncWorkload(ctx, wl); err != nil {
				return reconcile.Result{}, err
			}
		} else {
			r.sched.DeleteWorkload(lifecycle.KeyOf(wl))
		}
		return r.release(ctx, wl)
	}
	// A deactivated workload that holds quota is evicted by the engine,
	// from the fact this sync feeds it; the scheduler writes the eviction.
	unq, err := r.sched.SyncWorkload(ctx, wl)
	if err != nil {
		return reconcile.Result{}, err
	}
	if unq == nil {
		return reconcile.Result{}, nil
	}
	written, err := r.writer.Write(ctx, wl, lifecycle.Queue{Reason: unq.Reason, Message: unq.Message})
	if err != nil {
		return reconcile.Result{}, err
	}
	if written {
		r.recorder.Eventf(wl, nil, corev1.EventTypeWarning, lifecycle.EventUnqueueable, "Queue", unq.Message)
		if owner := lifecycle.OwnerOf(wl); owner != nil {
			r.recorder.Eventf(owner, wl, corev1.EventTypeWarning, lifecycle.EventUnqueueable, "Queue", unq.Message)
		}
	}
	return reconcile.Result{}, nil
}

// gone reports whether the Workload's job is going or gone: the Workload
// is being deleted, or it lost the owner berth gave it (its job was deleted
// with orphan propagation; Workloads berth creates always have owners and
// the finalizer).
func gone(wl *berthv1.Workload) bool {
	if !controllerutil.ContainsFinalizer(wl, berthv1.WorkloadFinalizer) {
		return false
	}
	return !wl.DeletionTimestamp.IsZero() || len(wl.OwnerReferences) == 0
}

// release lets a Workload whose job is going or gone go, once no pod of the
// job runs any more: until then it keeps its quota (the scheduler keeps it),
// so GPUs still held by terminating or orphaned pods are never handed out
// twice. An orphaned Workload is deleted then.
func (r *Reconciler) release(ctx context.Context, wl *berthv1.Workload) (reconcile.Result, error) {
	if lifecycle.HoldsQuota(lifecycle.PhaseOf(wl)) {
		running, err := persist.PodsRunning(ctx, r.reader, wl)
		if err != nil {
			return reconcile.Result{}, err
		}
		if running > 0 {
			ctrl.LoggerFrom(ctx).V(2).Info("keeping the quota of a workload whose job is gone while its pods run", "workload", wl.Name, "pods", running)
			return reconcile.Result{RequeueAfter: podsPoll}, nil
		}
	}
	base := wl.DeepCopy()
	controllerutil.RemoveFinalizer(wl, berthv1.WorkloadFinalizer)
	err := r.client.Patch(ctx, wl, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		// The Workload changed since the cache's copy (the scheduler wrote
		// its status, or a tenant its spec). That change reaches this
		// controller as an update, which every Workload update does, and
		// the release is tried again on the newer copy: no error log for
		// what a burst of releases does all the time, and no retry of our
		// own that a tenant updating the Workload could multiply.
		return reconcile.Result{}, nil
	}
	if client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("removing the finalizer of workload %s/%s: %w", wl.Namespace, wl.Name, err)
	}
	if wl.DeletionTimestamp.IsZero() {
		if err := r.client.Delete(ctx, wl); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting orphaned workload %s/%s: %w", wl.Namespace, wl.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("deleted a workload whose job was deleted with orphan propagation, once its pods were gone", "workload", wl.Name)
	}
	return reconcile.Result{}, nil
}

func (r *Reconciler) forLocalQueue(ctx context.Context, o client.Object) []reconcile.Request {
	return r.workloadsOf(ctx, o.GetNamespace(), o.GetName())
}

func (r *Reconciler) forClusterQueue(ctx context.Context, o client.Object) []reconcile.Request {
	lqs := &berthv1.LocalQueueList{}
	if err := r.client.List(ctx, lqs, client.MatchingFields{ClusterQueueIndex: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing LocalQueues of ClusterQueue", "clusterQueue", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range lqs.Items {
		out = append(out, r.workloadsOf(ctx, lqs.Items[i].Namespace, lqs.Items[i].Name)...)
	}
	return out
}

// forNamespace lists the pending workloads of a namespace. Admitted ones
// keep running where they were admitted, as in Kueue: their quota was
// granted under the selector of the time, and evicting running gangs for a
// label edit would make relabelling a namespace a way to kill its jobs.
func (r *Reconciler) forNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	wls := &berthv1.WorkloadList{}
	if err := r.client.List(ctx, wls, client.InNamespace(o.GetName())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing workloads of namespace", "namespace", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range wls.Items {
		if wls.Items[i].Status.Admission == nil {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&wls.Items[i])})
		}
	}
	return out
}

// workloadsOf lists the pending workloads of a LocalQueue: only they can
// change their queueing when a queue changes.
func (r *Reconciler) workloadsOf(ctx context.Context, namespace, queue string) []reconcile.Request {
	wls := &berthv1.WorkloadList{}
	if err := r.client.List(ctx, wls, client.InNamespace(namespace), client.MatchingFields{QueueNameIndex: queue}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing workloads of LocalQueue", "localQueue", queue)
		return nil
	}
	var out []reconcile.Request
	for i := range wls.Items {
		if wls.Items[i].Status.Admission == nil {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&wls.Items[i])})
		}
	}
	return out
}
