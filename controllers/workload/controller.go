// Package workload reconciles Workloads into the admission engine: every
// change of a Workload, of its LocalQueue or of its ClusterQueue re-feeds the
// workload to the scheduler, and a workload that cannot be queued at all
// (missing LocalQueue, namespace not accepted) gets a condition and an event
// that say what to fix.
package workload

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/scheduler"
	"github.com/berth-dev/berth/controllers/workloadstatus"
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

// EventUnqueueable is the reason of events about workloads that cannot be
// queued.
const EventUnqueueable = "Unqueueable"

// Reconciler feeds Workloads to the scheduler.
type Reconciler struct {
	client   client.Client
	sched    *scheduler.Scheduler
	recorder events.EventRecorder
}

// NewReconciler returns a Workload reconciler.
func NewReconciler(c client.Client, sched *scheduler.Scheduler, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, sched: sched, recorder: recorder}
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
		Complete(r)
}

// +kubebuilder:rbac:groups=berth.dev,resources=workloads,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=berth.dev,resources=localqueues;clusterqueues,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile feeds one Workload to the scheduler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	wl := &berthv1.Workload{}
	if err := r.client.Get(ctx, req.NamespacedName, wl); err != nil {
		if apierrors.IsNotFound(err) {
			r.sched.DeleteWorkload(scheduler.KeyOf(&berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}))
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading workload %s: %w", req, err)
	}
	unq, err := r.sched.SyncWorkload(ctx, wl)
	if err != nil || unq == nil {
		return reconcile.Result{}, err
	}
	written, err := workloadstatus.Patch(ctx, r.client, r.client, wl, func(w *berthv1.Workload) bool {
		return w.Status.Admission == nil && scheduler.SetPending(w, unq.Reason, unq.Message)
	})
	if err != nil {
		return reconcile.Result{}, err
	}
	if written {
		r.recorder.Eventf(wl, nil, corev1.EventTypeWarning, EventUnqueueable, "Queue", unq.Message)
		if owner := ownerOf(wl); owner != nil {
			r.recorder.Eventf(owner, wl, corev1.EventTypeWarning, EventUnqueueable, "Queue", unq.Message)
		}
	}
	return reconcile.Result{}, nil
}

// ownerOf is a reference object for the workload's controlling owner (its
// job), so events about the workload also show on the job users look at.
func ownerOf(wl *berthv1.Workload) *metav1.PartialObjectMetadata {
	ref := metav1.GetControllerOf(wl)
	if ref == nil {
		return nil
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: ref.APIVersion, Kind: ref.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: ref.Name, UID: ref.UID},
	}
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
